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
pids=()
cleanup() {
  local status=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  remove_own_work "$status"
}
trap cleanup EXIT
ulimit -n 20000

$bin/storage-node gen-certs --out "$work/certs" >/dev/null
RUST_LOG=warn $bin/storage-node serve --listen 127.0.0.1:17100 --data-dir "$work/data" \
  --certs "$work/certs/storage" 2>"$work/storage.log" &
storage=$!
pids+=("$storage")
RUST_LOG=warn $bin/compute-node serve --storage localhost:17100 --certs "$work/certs/compute" \
  --listen 127.0.0.1:16480 2>"$work/compute.log" &
compute=$!
pids+=("$compute")
mkdir -p "$work/redis"
redis-server --port 16490 --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
  --appendfsync everysec --save '' --maxclients 10000 >"$work/redis.log" 2>&1 &
redis=$!
pids+=("$redis")
wait_for "compute-node serve on 127.0.0.1:16480 (see $work/compute.log)" 30 redis-cli -p 16480 ping
wait_for "redis-server on 127.0.0.1:16490 (see $work/redis.log)" 30 redis-cli -p 16490 ping

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
pids+=($!)

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
