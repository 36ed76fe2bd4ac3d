#!/usr/bin/env bash
# Fuzzes the safetensors header parser, config.json and tokenizer.json with libFuzzer + ASan +
# UBSan, SECONDS each.
#
#   ci/fuzz.sh [SECONDS]        # default 60
#
# Builds the targets with clang++ in build-fuzz/ (-DKVBENCH_FUZZ=ON). safetensors_fuzz starts
# from the regression corpus tests/data/safetensors/ (read-only); config_fuzz and tokenizer_fuzz
# from stories260K's files in the shared folder (KVBENCH_SHARED, default ../shared) when there.
# Each keeps the inputs it discovers in build-fuzz/<target>-corpus/ across runs. A crash leaves
# its input in build-fuzz/<target>-crash-*: turn it into a regression test.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$root/build-fuzz

cmake -S "$root" -B "$build" -DKVBENCH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target safetensors_fuzz config_fuzz tokenizer_fuzz

# Tokens of the header grammar help the fuzzer past the JSON layer quickly.
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

mkdir -p "$build/fuzz-corpus"
"$build/engine/model/fuzz/safetensors_fuzz" "$build/fuzz-corpus" "$root/tests/data/safetensors" \
  -dict="$build/safetensors.dict" -max_len=4096 -max_total_time="$seconds" \
  -artifact_prefix="$build/safetensors-" -print_final_stats=1

shared=${KVBENCH_SHARED:-$root/../shared}/models/stories260K
for target in config tokenizer; do
  corpus=$build/$target-corpus
  mkdir -p "$corpus"
  [ -f "$shared/$target.json" ] && cp -n "$shared/$target.json" "$corpus/seed.json" && chmod u+w "$corpus/seed.json"
  "$build/engine/model/fuzz/${target}_fuzz" "$corpus" -max_len=16384 -rss_limit_mb=4096 \
    -max_total_time="$seconds" -artifact_prefix="$build/$target-" -print_final_stats=1
done
