# A kernels/cuda source as C++ for the CUDA emulation (tests/cuda_emulation/README.md):
#   cmake -DIN=kernels/cuda/x.cu -DOUT=build/.../x.cpp -P translate.cmake
#   cmake -DIN=kernels/cuda/torch_glue.cpp -DOUT=... -DGLUE=ON -P translate.cmake
# A kernel source: two rewrites, the rest compiles as it is against tests/cuda_emulation/include/:
#   name<T><<<grid, block, shared, stream>>>(args)
#     -> ::kvb_emu::launch(name<T>, ::kvb_emu::LaunchConfig(grid, block, shared, stream), "name<T>")(args)
#   extern __shared__ [__align__(N)] T name[];  ->  T* name = ::kvb_emu::dynamic_shared<T>();
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
  "extern[ \t]+__shared__[ \t]+(__align__\\([0-9]+\\)[ \t]+)?([A-Za-z_][A-Za-z0-9_:]*)[ \t]+([A-Za-z_][A-Za-z0-9_]*)\\[\\];"
  "\\2* \\3 = ::kvb_emu::dynamic_shared<\\2>();"
  source "${source}")
# A static shared variable, one per declarator:
#   __shared__ T a[X][Y], b;  ->  static char kvb_shared_tag_a;
#                                 auto& a = ::kvb_emu::shared_static<T[X][Y]>(&kvb_shared_tag_a); ...
# (the tag, a static of the declaration's scope, tells the declarations apart).
while(source MATCHES "__shared__[ \t]+([^;]*);")
  set(whole "${CMAKE_MATCH_0}")
  string(REPLACE "," ";" declarators "${CMAKE_MATCH_1}")
  set(type "")
  set(rewritten "")
  foreach(declarator ${declarators})
    string(STRIP "${declarator}" declarator)
    string(FIND "${declarator}" "[" bracket)
    set(dims "")
    if(bracket GREATER -1)
      string(SUBSTRING "${declarator}" ${bracket} -1 dims)
      string(SUBSTRING "${declarator}" 0 ${bracket} declarator)
      string(STRIP "${declarator}" declarator)
    endif()
    if(NOT declarator MATCHES "^(.*[^A-Za-z0-9_])?([A-Za-z_][A-Za-z0-9_]*)$")
      message(FATAL_ERROR "${IN}: a __shared__ declaration translate.cmake does not read: ${whole}")
    endif()
    set(name "${CMAKE_MATCH_2}")
    if(type STREQUAL "")  # the first declarator carries the type
      string(STRIP "${CMAKE_MATCH_1}" type)
      if(type STREQUAL "")
        message(FATAL_ERROR "${IN}: a __shared__ declaration without a type: ${whole}")
      endif()
    endif()
    string(APPEND rewritten "static char kvb_shared_tag_${name}; auto& ${name} = "
           "::kvb_emu::shared_static<${type}${dims}>(&kvb_shared_tag_${name}); ")
  endforeach()
  string(REPLACE "${whole}" "${rewritten}" source "${source}")
endwhile()
if(source MATCHES "<<<|__shared__")
  message(FATAL_ERROR "${IN}: a launch or shared variable translate.cmake does not rewrite")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by tests/cuda_emulation/translate.cmake: edit that file.\n${prelude}\n#line 1 \"${IN}\"\n${source}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
