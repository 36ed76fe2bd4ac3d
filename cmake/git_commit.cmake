# Writes OUT: #define KVBENCH_GIT_COMMIT "<12 hex digits>", with "-dirty" when tracked files
# differ from that commit and "unknown" outside a git checkout. Run at every build (not at
# configure time), and the file rewritten only when the text changes, so a run's provenance
# names the commit the binary was built from and only runner.cpp recompiles when it moves.
# Usage: cmake -DSOURCE_DIR=... -DOUT=... -P git_commit.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE failed)
if(failed OR NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "#define KVBENCH_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
