#!/usr/bin/env bash
# Fuzzes the safetensors header parser with libFuzzer + ASan + UBSan.
#
#   ci/fuzz.sh [SECONDS]        # default 60
#
# Builds the target with clang++ in build-fuzz/ (-DKVBENCH_FUZZ=ON), seeds it with the
# regression corpus tests/data/safetensors/ (read-only) and keeps the inputs it discovers in
# build-fuzz/fuzz-corpus/ across runs. A crash leaves its input in build-fuzz/crash-*: turn it
# into a regression case in tests/data/safetensors/make_corpus.py.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$root/build-fuzz

cmake -S "$root" -B "$build" -DKVBENCH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target safetensors_fuzz

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
  -artifact_prefix="$build/" -print_final_stats=1
