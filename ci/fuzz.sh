#!/usr/bin/env bash
# Fuzzes kvbench's readers of user files with libFuzzer + ASan + UBSan, SECONDS each:
#   safetensors_fuzz       safetensors headers      seeds: tests/data/safetensors/
#   config_fuzz            config.json              seeds: stories260K's
#   tokenizer_fuzz         tokenizer.json           seeds: stories260K's
#   tokenizer_config_fuzz  tokenizer_config.json    seeds: stories260K's (its tokenizer.json fixed)
#   suite_fuzz             suite files              seeds: suites/*.json
#   longbench_line_fuzz    LongBench .jsonl lines   seeds: tests/data/longbench/ lines
#
#   ci/fuzz.sh [SECONDS] [TARGET...]   # default 60 s, every target
#
# Builds with clang++ in build-fuzz/ (-DKVBENCH_FUZZ=ON; the first build compiles a sanitized
# copy of kvbench for suite_fuzz and longbench_line_fuzz, several minutes). stories260K comes
# from the shared folder (KVBENCH_SHARED, default ../shared); targets seeded from it start
# empty without it. Each target keeps what it discovers in build-fuzz/<target>-corpus/ across
# runs. A crash leaves its input in build-fuzz/<target>-crash-*: fix the bug and keep the input
# as a regression test of the code it crashed (as tests/data/safetensors/ holds the header
# parser's).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors config tokenizer tokenizer_config suite longbench_line)
build=$root/build-fuzz
shared=${KVBENCH_SHARED:-$root/../shared}/models/stories260K

cmake -S "$root" -B "$build" -DKVBENCH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]/%/_fuzz}"

# Tokens of the safetensors header grammar help the fuzzer past the JSON layer quickly.
cat >"$build/safetensors.dict" <<'DICT'
"dtype"
"shape"
"data_offsets"
"__metadata__"
"F32"
"F16"
"BF16"
"I64"
"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"
"18446744073709551615"
"9223372036854775808"
"-1"
DICT

# Seeds of one target into its corpus folder (copies, writable: libFuzzer may rewrite them).
seed() {
  local corpus=$1; shift
  mkdir -p "$corpus"
  for file in "$@"; do
    [ -f "$file" ] && cp -n "$file" "$corpus/seed-$(basename "$file")" && chmod u+w "$corpus/seed-$(basename "$file")"
  done
  return 0
}

export KVBENCH_FUZZ_TOKENIZER_JSON=$shared/tokenizer.json
for target in "${targets[@]}"; do
  corpus=$build/$target-corpus
  options=(-max_len=16384 -rss_limit_mb=4096)
  case $target in
    safetensors)      mkdir -p "$corpus"; options=(-dict="$build/safetensors.dict" -max_len=4096)
                      set -- "$root/tests/data/safetensors" ;;
    config|tokenizer|tokenizer_config) seed "$corpus" "$shared/$target.json"; set -- ;;
    suite)            seed "$corpus" "$root"/suites/*.json; set -- ;;
    longbench_line)   mkdir -p "$corpus"
                      for file in "$root"/tests/data/longbench/*/*.jsonl; do
                        split -l 1 -a 3 "$file" "$corpus/seed-$(basename "$file" .jsonl)-"
                      done
                      set -- ;;
  esac
  if [ "$target" = tokenizer_config ] && [ ! -f "$KVBENCH_FUZZ_TOKENIZER_JSON" ]; then
    echo "tokenizer_config: skipped, no $KVBENCH_FUZZ_TOKENIZER_JSON"; continue
  fi
  "$build/${target}_fuzz" "$corpus" "$@" "${options[@]}" -max_total_time="$seconds" \
    -artifact_prefix="$build/$target-" -print_final_stats=1
done
