#!/usr/bin/env bash
# Runs each fuzz target for SECONDS, JOBS of them at a time (each libFuzzer run uses one
# core, so on two cores two targets get the same fuzzing as one after the other, in half
# the wall time). Each run starts from its working corpus and the committed seeds
# (fuzz/corpus/TARGET), with fuzz/TARGET.dict where there is one; its last lines are
# printed in the targets' order (a failed run's last 80). Exits 1 naming every target that found a crash.
# Usage: run-fuzz.sh BUILD_DIR SECONDS JOBS TARGET...
set -uo pipefail
build=$1 seconds=$2 jobs=$3
shift 3
logs=$build/fuzz-logs
mkdir -p "$logs"

run_one() {
  local build=$1 seconds=$2 logs=$3 t=$4
  local work=$build/corpus/$t dict=()
  mkdir -p "$work"
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  if "$build/fuzz/$t" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 "$work" "fuzz/corpus/$t" \
      > "$logs/$t.log" 2>&1; then
    echo ok > "$logs/$t.status"
  else
    echo failed > "$logs/$t.status"
  fi
}
export -f run_one

rm -f "$logs"/*.status
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ "$build" "$seconds" "$logs" {}

failed=()
for t in "$@"; do
  echo "== $t for ${seconds}s"
  if [ "$(cat "$logs/$t.status" 2>/dev/null)" = ok ]; then
    tail -n 12 "$logs/$t.log"
  else
    tail -n 80 "$logs/$t.log" 2>/dev/null
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found a crash in: ${failed[*]} (their whole logs: $logs/TARGET.log)"
  exit 1
fi
