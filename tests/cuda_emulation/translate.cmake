# A kernels/cuda source as C++ for the CUDA emulation (tests/cuda_emulation/README.md):
#   cmake -DIN=kernels/cuda/x.cu -DOUT=build/.../x.cpp -P translate.cmake
#   cmake -DIN=kernels/cuda/torch_glue.cpp -DOUT=... -DGLUE=ON -P translate.cmake
# A kernel source: two rewrites, the rest compiles as it is against tests/cuda_emulation/include/:
#   name<T><<<grid, block, shared, stream>>>(args)
#     -> ::kvb_emu::launch(name<T>, ::kvb_emu::LaunchConfig(grid, block, shared, stream), "name<T>")(args)
#   extern __shared__ T name[];  ->  T* name = ::kvb_emu::dynamic_shared<T>();
# A launch whose configuration holds a ';' or whose kernel's template arguments nest is left as
# it is, and fails to compile: extend the patterns then.
# The glue (GLUE): host tensors stand for device ones, so `is_cuda()` asks `is_cpu()`; its
# fresh tensors come from torch_glue_emulation.h (0xFF bytes, as cudaMalloc's are here).
file(READ "${IN}" source)
if(GLUE)
  string(REPLACE "is_cuda()" "is_cpu()" source "${source}")
  string(REPLACE "at::empty(" "::kvb_emu::empty(" source "${source}")
  string(REPLACE "at::empty_like(" "::kvb_emu::empty_like(" source "${source}")
  if(source MATCHES "kCUDA|\\.cuda\\(|<<<")
    message(FATAL_ERROR "${IN}: a CUDA use translate.cmake does not rewrite for the glue")
  endif()
  set(prelude "#include \"tests/cuda_emulation/torch_glue_emulation.h\"")
else()
  set(prelude "#include <cuda_runtime.h>")
endif()
string(REGEX REPLACE
  "([A-Za-z_][A-Za-z0-9_]*(<[^<>;{}]*>)?)[ \t\r\n]*<<<([^;]*)>>>"
  "::kvb_emu::launch(\\1, ::kvb_emu::LaunchConfig(\\3), \"\\1\")"
  source "${source}")
string(REGEX REPLACE
  "extern[ \t]+__shared__[ \t]+([A-Za-z_][A-Za-z0-9_:]*)[ \t]+([A-Za-z_][A-Za-z0-9_]*)\\[\\];"
  "\\1* \\2 = ::kvb_emu::dynamic_shared<\\1>();"
  source "${source}")
if(source MATCHES "<<<|extern[ \t]+__shared__")
  message(FATAL_ERROR "${IN}: a launch or dynamic shared array translate.cmake does not rewrite")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by tests/cuda_emulation/translate.cmake: edit that file.\n${prelude}\n#line 1 \"${IN}\"\n${source}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
