// The emulation keeps its 16-bit types in cuda_runtime.h.
#pragma once
#include <cuda_runtime.h>
