#!/usr/bin/env bash
# 1000 redis-benchmark clients (-c 1000 -P 16 -d 4096, SET and GET) against
# `compute-node serve` in front of a storage node, both with default
# settings, then against redis-server (AOF, everysec) in the same run, while
# the resident memory of each server process is sampled. Prints ops/s, the
# error reply that stopped redis-benchmark if one did (it stops at the
# first), and the peak RSS (VmHWM) of every process.
# Usage: scripts/bench-load.sh [WORKDIR] [REQUESTS]   (about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${2:-200000}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
need redis-server redis-server redis-benchmark redis-tools redis-cli redis-tools

cargo build --release -q -p storage-node -p compute-node
bin=target/release
trap stop_started EXIT
ulimit -n 20000

start_splitkv 17100 16480
start_redis 16490 --maxclients 10000
storage=$storage_pid compute=$compute_pid redis=$redis_pid

# rss_kib PID FIELD: the field (VmRSS, VmHWM) of /proc/PID/status in KiB.
rss_kib() { awk -v f="$2:" '$1==f{print $2}' "/proc/$1/status"; }
# Samples VmRSS of every server every 100 ms into $work/rss.tsv.
(
  while true; do
    printf '%s\t%s\t%s\n' "$(rss_kib "$compute" VmRSS)" "$(rss_kib "$storage" VmRSS)" \
      "$(rss_kib "$redis" VmRSS)"
    sleep 0.1
  done
) >"$work/rss.tsv" 2>/dev/null &
started+=($!)

for target in splitkv:16480 redis:16490; do
  name=${target%:*} port=${target#*:}
  redis-benchmark -p "$port" -c 1000 -P 16 -d 4096 -t set,get -n "$requests" --csv \
    >"$work/$name.csv" 2>"$work/$name.err" || true
  tr -d '"' <"$work/$name.csv" | awk -F, -v n="$name" \
    '$1=="SET"||$1=="GET"{printf "%-8s %s %9.0f ops/s\n", n, $1, $2}'
  errors=$(cat "$work/$name.csv" "$work/$name.err" | grep 'Error from server' || true)
  echo "$name errors: ${errors:-none}"
done

mib() { awk -v k="$1" 'BEGIN{printf "%.1f MiB", k/1024}'; }
peak_col() { awk -v c="$1" 'BEGIN{m=0} $c>m{m=$c} END{print m}' "$work/rss.tsv"; }
echo "peak RSS (VmHWM): compute node $(mib "$(rss_kib "$compute" VmHWM)"), storage node $(mib "$(rss_kib "$storage" VmHWM)"), redis-server $(mib "$(rss_kib "$redis" VmHWM)")"
echo "peak RSS sampled every 100 ms: compute node $(mib "$(peak_col 1)"), storage node $(mib "$(peak_col 2)"), redis-server $(mib "$(peak_col 3)")"
grep -iE 'warn|error' "$work/compute.log" "$work/storage.log" | head -5 || true
