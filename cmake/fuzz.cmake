# libFuzzer targets (ci/fuzz.sh runs them), each beside the code it fuzzes:
#   safetensors_fuzz       engine/model/fuzz       safetensors headers
#   config_fuzz            engine/model/fuzz       config.json
#   tokenizer_fuzz         engine/tokenizer/fuzz   tokenizer.json
#   tokenizer_config_fuzz  engine/tokenizer/fuzz   tokenizer_config.json
#   suite_fuzz             harness/suite/fuzz      suite files
#   longbench_line_fuzz    datasets/longbench/fuzz a LongBench .jsonl line, prompts and metrics
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "KVBENCH_FUZZ=ON needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
endif()

# UBSan joins ASan so that undefined behaviour (shifts, overflow) is a finding too; with
# -fno-sanitize-recover it aborts instead of printing and going on.
set(KVBENCH_FUZZ_SANITIZERS address,undefined)
set(KVBENCH_FUZZ_FLAGS -fsanitize=fuzzer,${KVBENCH_FUZZ_SANITIZERS} -fno-sanitize-recover=all)

function(kvbench_fuzz_target name)  # name source... (torch-free sources)
  add_executable(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE nlohmann_json::nlohmann_json)
  target_compile_options(${name} PRIVATE ${KVBENCH_FUZZ_FLAGS} -g -O1)
  target_link_options(${name} PRIVATE ${KVBENCH_FUZZ_FLAGS})
endfunction()

kvbench_fuzz_target(safetensors_fuzz engine/model/fuzz/safetensors_fuzz.cpp
                    engine/model/safetensors_header.cpp)
kvbench_fuzz_target(config_fuzz engine/model/fuzz/config_fuzz.cpp engine/model/model_config.cpp)
file(GLOB KVBENCH_TOKENIZER_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/engine/tokenizer/*.cpp)
kvbench_fuzz_target(tokenizer_fuzz engine/tokenizer/fuzz/tokenizer_fuzz.cpp
                    ${KVBENCH_TOKENIZER_SOURCES})
kvbench_fuzz_target(tokenizer_config_fuzz engine/tokenizer/fuzz/tokenizer_config_fuzz.cpp
                    ${KVBENCH_TOKENIZER_SOURCES})

# A suite is validated by the method and dataset registries, a LongBench line formatted and
# scored by the datasets: these two link a sanitized copy of all of kvbench (and LibTorch).
add_library(kvbench_fuzz_core OBJECT ${KVBENCH_SOURCES})
target_include_directories(kvbench_fuzz_core PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(kvbench_fuzz_core PUBLIC ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json
                      CLI11::CLI11 SQLite::SQLite3)
target_compile_definitions(kvbench_fuzz_core PUBLIC
  KVBENCH_GIT_COMMIT="fuzz" KVBENCH_BUILD_TYPE="fuzz" KVBENCH_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_compile_options(kvbench_fuzz_core PUBLIC
  -fsanitize=fuzzer-no-link,${KVBENCH_FUZZ_SANITIZERS} -fno-sanitize-recover=all -g -O1)
if(OpenMP_CXX_FOUND)
  target_link_libraries(kvbench_fuzz_core PUBLIC OpenMP::OpenMP_CXX)
endif()
foreach(target suite_fuzz longbench_line_fuzz)
  if(target STREQUAL suite_fuzz)
    add_executable(${target} harness/suite/fuzz/suite_fuzz.cpp)
  else()
    add_executable(${target} datasets/longbench/fuzz/longbench_line_fuzz.cpp)
  endif()
  target_link_libraries(${target} PRIVATE kvbench_fuzz_core)
  target_link_options(${target} PRIVATE ${KVBENCH_FUZZ_FLAGS})
endforeach()
