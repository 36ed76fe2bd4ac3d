#!/usr/bin/env bash
# Lists the tests CTest skipped with the reason each printed, grouped by reason: what follows
# "skipped: " in a line of the test's output (the project's convention: GTEST_SKIP() <<
# "skipped: ...", ci/slurm_test.sh's "SKIPPED: ..."), else the message after gtest's
# "file:line: Skipped", else CTest's own (e.g. SKIP_RETURN_CODE=77). Reads the JUnit files of
# `ctest --output-junit FILE` (ci/test.sh: build/'s whole suite and build-cuda/'s GPU tests).
# Usage: ci/skipped_tests.sh JUNIT.xml [JUNIT.xml ...]     Prints nothing when no test was skipped.
set -euo pipefail
(($# > 0)) || { echo "usage: ci/skipped_tests.sh JUNIT.xml [JUNIT.xml ...]" >&2; exit 2; }
for junit in "$@"; do
  [ -f "$junit" ] || { echo "skipped_tests: $junit: no such file" >&2; exit 2; }
done

awk '
function attr(line, key,    m) {
  if (match(line, key "=\"[^\"]*\"")) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 3)
  return ""
}
function unescape(s) {
  gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "\047", s)
  gsub(/&amp;/, "\\&", s)
  return s
}
# One line of a skipped test'"'"'s output: keeps the first reason it states.
function consider(line,    at) {
  line = unescape(line)
  if (reason != "") return
  at = index(tolower(line), "skipped: ")
  if (at > 0) { reason = substr(line, at + 9); return }
  if (after_gtest_skip && line != "") { reason = line; return }
  if (line ~ /: Skipped$/) after_gtest_skip = 1
}
/<testcase / {
  name = unescape(attr($0, "name")); notrun = ($0 ~ /status="notrun"/)
  reason = ""; ctest_reason = ""; in_output = 0; after_gtest_skip = 0
}
notrun && /<skipped / { ctest_reason = unescape(attr($0, "message")) }
notrun && /<system-out>/ { in_output = 1; sub(/.*<system-out>/, "") }
notrun && in_output {
  line = $0
  ends = sub(/<\/system-out>.*/, "", line)
  consider(line)
  if (ends) in_output = 0
}
/<\/testcase>/ && notrun {
  r = reason != "" ? reason : (ctest_reason != "" ? ctest_reason : "no reason given")
  if (!(r in count)) order[++reasons] = r
  count[r]++
  names[r] = names[r] (count[r] > 1 ? ", " : "") name
  skipped++
  notrun = 0
}
END {
  if (!skipped) exit
  printf "%d test%s skipped:\n", skipped, skipped == 1 ? "" : "s"
  for (i = 1; i <= reasons; i++) {
    r = order[i]
    n = split(names[r], list, ", ")
    shown = list[1]
    for (k = 2; k <= n && k <= 3; k++) shown = shown ", " list[k]
    if (n > 3) shown = shown " and " (n - 3) " more"
    printf "  - %s\n      (%s)\n", r, n == 1 ? shown : n " tests: " shown
  }
}' "$@"
