#!/usr/bin/env bash
# scripts/test.sh — `make test`: every stage in turn, each timed, and at the
# end (passed or not) the time of each stage and the slowest 20 tests.
#
# The stages are the Makefile's targets: setup, build, vet, unit, fuzz,
# release, e2e-prep (the npm installs and the test cluster) and e2e; the two
# slow tool builds that only tests need start first, in the background
# (make prefetch). A stage that fails stops the run. Logs and each test's
# time: .cache/logs/ (stages.tsv, unit-times.tsv, e2e-times.tsv).
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=.cache/logs
mkdir -p "$LOGS"
: >"$LOGS/stages.tsv"
rm -f "$LOGS"/*-times.tsv
T0=$(date +%s)

current='' start=0

summary() {
  local status=$?
  # A stage cut short (a signal, the alarm) is listed too.
  if [[ -n $current ]]; then
    printf '%s\t%d\t%s\n' "$current" $(( $(date +%s) - start )) "interrupted" >>"$LOGS/stages.tsv"
  fi
  echo
  echo "make test: stage times (kernel $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
  awk -F'\t' '{ printf "  %-10s %6ds  %s\n", $1, $2, $3 }' "$LOGS/stages.tsv"
  printf '  %-10s %6ds\n' total $(( $(date +%s) - T0 ))
  if compgen -G "$LOGS/*-times.tsv" >/dev/null; then
    echo "the slowest 20 tests (seconds, result, test; parallel tests overlap, so their times add up to more than their stage's):"
    sort -t$'\t' -k1,1 -rn "$LOGS"/*-times.tsv | head -20 | awk -F'\t' '{ printf "  %8.1f  %-4s  %s\n", $1, $2, $3 }'
  fi
  exit "$status"
}
trap summary EXIT
trap 'exit 143' TERM INT

make --no-print-directory prefetch
for stage in setup build vet unit fuzz release e2e-prep e2e; do
  start=$(date +%s) current=$stage
  echo "=== make $stage"
  if make --no-print-directory "$stage"; then
    result=ok
  else
    result=FAILED
  fi
  current=''
  printf '%s\t%d\t%s\n' "$stage" $(( $(date +%s) - start )) "$result" >>"$LOGS/stages.tsv"
  [[ $result == ok ]] || exit 1
done
