#!/usr/bin/env bash
# Runs every libFuzzer target in //fuzz for SECONDS each, one per core at a time
# (TPSERVE_FUZZ_JOBS sets how many), and ends with one line: "N targets, M executions, K crashes".
# Exit status 1 when anything crashed (the crashing input's path is printed), 2 when the build
# failed.
#
#   tools/fuzz.sh 30                      # all targets, 30 s each
#   tools/fuzz.sh 60 gguf_fuzzer          # one target
#
# Builds with clang in an output base of its own (TPSERVE_FUZZ_OUTPUT_BASE, default
# ~/.cache/tpserve-bazel-fuzz) so the gcc build cache is untouched. Each target starts from a
# copy of fuzz/corpus/<target>/ in a temp dir; the seeds in the tree are never modified. The
# temp dir is removed unless something crashed or TPSERVE_FUZZ_KEEP=1. TPSERVE_FUZZ_FLAGS adds
# libFuzzer flags after the script's own (later ones win), e.g. "-max_len=65536".
# TPSERVE_FUZZ_JUNIT=FILE also writes a JUnit report there, one test case per target (a crash
# or a failed build is a failure), which scripts/test.sh counts with the other tests.
set -uo pipefail

usage() { echo "usage: tools/fuzz.sh SECONDS [TARGET...]" >&2; exit 2; }
[[ $# -ge 1 && $1 =~ ^[0-9]+$ && $1 -gt 0 ]] || usage
seconds=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/bazel_cache.sh  # the disk cache every script shares
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for src in fuzz/*_fuzzer.cc; do targets+=("$(basename "$src" .cc)"); done
fi

junit=${TPSERVE_FUZZ_JUNIT:-}
junit_cases=()
# junit_case NAME [FAILURE-MESSAGE]
junit_case() {
  local message=${2:-}
  if [[ -z $message ]]; then
    junit_cases+=("<testcase classname=\"fuzz\" name=\"$1\"/>")
  else
    message=$(sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$message")
    junit_cases+=("<testcase classname=\"fuzz\" name=\"$1\"><failure message=\"$message\"/></testcase>")
  fi
}
write_junit() {
  [[ -n $junit ]] || return 0
  { echo "<testsuite name=\"fuzz\" tests=\"${#junit_cases[@]}\">"
    printf '  %s\n' "${junit_cases[@]}"
    echo "</testsuite>"; } >"$junit"
}

output_base=${TPSERVE_FUZZ_OUTPUT_BASE:-$HOME/.cache/tpserve-bazel-fuzz}
bazel_fuzz() { CC=clang bazel --output_base="$output_base" "$@"; }
work=$(mktemp -d /tmp/tpserve-fuzz.XXXXXX)
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:$t"); done
echo "fuzz: building ${#targets[@]} targets with clang (log: $work/build.log)" >&2
if ! bazel_fuzz build --config=fuzz "${labels[@]}" >"$work/build.log" 2>&1; then
  grep -E "error|ERROR" "$work/build.log" | head -20 >&2
  echo "fuzz: build failed; see $work/build.log" >&2
  junit_case build "clang build of //fuzz failed; see $work/build.log"
  write_junit
  exit 2
fi
bin=$(bazel_fuzz info --config=fuzz bazel-bin 2>/dev/null)

# fuzz_one TARGET: runs it for SECONDS from a copy of its seeds; its exit status goes to rc.
fuzz_one() {
  local t=$1 dir="$work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  [[ -d fuzz/corpus/$t ]] && cp fuzz/corpus/"$t"/* "$dir/corpus/"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" ${TPSERVE_FUZZ_FLAGS:-} \
    "$dir/corpus" >"$dir/log" 2>&1
  echo $? >"$dir/rc"
}

# A libFuzzer process runs on one core: TPSERVE_FUZZ_JOBS targets (default: one per core) run
# side by side, each still for SECONDS of its own.
jobs_max=${TPSERVE_FUZZ_JOBS:-$(nproc)}
[[ $jobs_max =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: TPSERVE_FUZZ_JOBS must be a positive count, got '$jobs_max'" >&2; exit 2; }
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, $jobs_max at a time" >&2
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n; done
  fuzz_one "$t" &
done
wait

total_runs=0
crashes=0
for t in "${targets[@]}"; do
  dir="$work/$t"
  rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
  # "Done N runs" on a clean finish; the final stats also come after a crash.
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$dir/log" | tail -1)
  [[ -n $runs ]] || runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$dir/log" | tail -1)
  runs=${runs:-0}
  total_runs=$((total_runs + runs))
  corpus_size=$(find "$dir/corpus" -type f | wc -l)
  artifacts=$(find "$dir/artifacts" -type f)
  if [[ $rc -ne 0 || -n $artifacts ]]; then
    crashes=$((crashes + 1))
    echo "$t: CRASH after $runs executions (exit $rc); log: $dir/log"
    grep -m3 -E "^==[0-9]+==ERROR|runtime error|SUMMARY|deadly signal|timeout|out-of-memory" "$dir/log" | sed 's/^/  /'
    for a in $artifacts; do echo "  input: $a"; done
    junit_case "$t" "crash after $runs executions (exit $rc); log $dir/log; input ${artifacts:-none saved}"
  else
    echo "$t: $runs executions, corpus $corpus_size files"
    junit_case "$t"
  fi
done

if [[ $crashes -eq 0 && ${TPSERVE_FUZZ_KEEP:-0} != 1 ]]; then rm -rf "$work"; else echo "fuzz: kept $work" >&2; fi
write_junit
echo "${#targets[@]} targets, $total_runs executions, $crashes crashes"
[[ $crashes -eq 0 ]]
