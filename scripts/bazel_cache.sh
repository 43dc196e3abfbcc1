# Sourced (not run) by every script that runs Bazel: scripts/test.sh, scripts/run.sh,
# tools/fuzz.sh and the bench scripts. It defines a shell function `bazel` that runs the real one
# with one more rc file, so that every output base (main, ASan+UBSan, TSan, fuzz, -c opt) shares
#   - one content-addressed disk cache, $TPSERVE_BAZEL_DISK_CACHE (default
#     ~/.cache/tpserve/bazel-disk): a fresh clone on a machine that has built the tree before
#     compiles only what changed. Bazel checks every blob it reads from it against its digest
#     and builds again on a mismatch, so a corrupt or partial entry costs one action, never the
#     build (tests/ci/test_disk_cache.py truncates entries to show it);
#   - one repository cache, ~/.cache/tpserve/bazel-repo, for the pinned archives (XGrammar,
#     FlashInfer, Abseil's source), so a new output base does not download them again.
# Only the disk cache has a size bound, TPSERVE_BAZEL_DISK_CACHE_MAX_GB (default 16;
# a cold run of every pass and a header change stored 2.7 GiB):
# `tpserve_trim_disk_cache` removes its least recently used entries (tools/trim_disk_cache.py),
# never anything beside it (the model, the venvs). Test results are never taken from a cache
# (`test --nocache_test_results` in .bazelrc): tests read the model through --test_env, which no
# cache key covers.
#
# By hand: `source scripts/bazel_cache.sh` in a shell makes its `bazel` use the caches too.

TPSERVE_CACHE_HOME="$HOME/.cache/tpserve"
TPSERVE_BAZEL_DISK_CACHE="${TPSERVE_BAZEL_DISK_CACHE:-$TPSERVE_CACHE_HOME/bazel-disk}"
TPSERVE_BAZEL_REPO_CACHE="${TPSERVE_BAZEL_REPO_CACHE:-$TPSERVE_CACHE_HOME/bazel-repo}"
TPSERVE_BAZEL_DISK_CACHE_MAX_GB="${TPSERVE_BAZEL_DISK_CACHE_MAX_GB:-16}"
_tpserve_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The rc file is written on every use (atomically: two scripts may start at once), so it always
# names this machine's $HOME; Bazel's own rc files cannot read an environment variable.
tpserve_bazelrc() {
  local rc="$TPSERVE_CACHE_HOME/bazel-cache.rc" tmp
  mkdir -p "$TPSERVE_CACHE_HOME" "$TPSERVE_BAZEL_DISK_CACHE" "$TPSERVE_BAZEL_REPO_CACHE"
  tmp=$(mktemp "$rc.XXXXXX")
  {
    echo "# Written by scripts/bazel_cache.sh; rewritten on every use."
    # --bazelrc takes the place of ~/.bazelrc: read it still, where there is one.
    echo "try-import $HOME/.bazelrc"
    echo "build --disk_cache=$TPSERVE_BAZEL_DISK_CACHE"
    echo "build --repository_cache=$TPSERVE_BAZEL_REPO_CACHE"
    echo "fetch --repository_cache=$TPSERVE_BAZEL_REPO_CACHE"
    echo "query --repository_cache=$TPSERVE_BAZEL_REPO_CACHE"
    echo "sync --repository_cache=$TPSERVE_BAZEL_REPO_CACHE"
  } >"$tmp"
  mv -f "$tmp" "$rc"
  echo "$rc"
}

bazel() {
  local rc
  rc=$(tpserve_bazelrc) || return 1
  command bazel --bazelrc="$rc" "$@"
}

# Never fails its caller: an untrimmed cache is a warning (trim_disk_cache.py says why), not a
# reason to stop a build.
tpserve_trim_disk_cache() {
  python3 "$_tpserve_root/tools/trim_disk_cache.py" \
    --max_gb="$TPSERVE_BAZEL_DISK_CACHE_MAX_GB" "$TPSERVE_BAZEL_DISK_CACHE" ||
    echo "bazel_cache: $TPSERVE_BAZEL_DISK_CACHE was not trimmed" >&2
}
