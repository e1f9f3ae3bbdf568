#!/usr/bin/env bash
# Measures the compute node in one run on loopback, next to its references:
#   - the raw QUIC bulk figure (storage-node bench-transport),
#   - the disk's sequential reads of 10 MiB with O_DIRECT (fio), which
#     bound a window fetch of data that is on the disk only,
#   - sequential and hot reads through the windows (eval, 16 threads, 4 KiB),
#   - index rebuild of 1 Mi keys (eval's restart phase, 16-byte values),
#   - redis-benchmark SET/GET, 4 KiB, 16 clients, -P 1 and -P 16, -r 5000
#     and -r 100000, against `compute-node serve` and against redis-server
#     (AOF, everysec), alternately and twice each; then random GETs against
#     a compute node started afresh (cold value cache).
# Usage: scripts/bench-compute.sh [WORKDIR]   (a few minutes; 2 GiB of disk)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
need redis-server redis-server redis-benchmark redis-tools redis-cli redis-tools fio fio
need_free_mib "$work" 2048

cargo build --release -q -p storage-node -p compute-node -p eval
bin=target/release
pids=()
cleanup() {
  local status=$?
  for p in "${compute_pid:-}" "${storage_pid:-}" "${pids[@]}"; do
    if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
  remove_own_work "$status"
}
trap cleanup EXIT

echo "== transport (raw QUIC bulk, one stream)"
$bin/storage-node bench-transport --dir "$work" --seconds 2 --rounds 3 2>/dev/null | grep -E '^[12]\.'

echo "== disk (fio: O_DIRECT sequential reads of 10 MiB, one at a time, as a window fetch reads)"
if fio --name=seqread --filename="$work/fio.dat" --size=1G --bs=10M --rw=read --direct=1 \
  --ioengine=psync --time_based --runtime=4 --output-format=json >"$work/fio.json" 2>"$work/fio.log"; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print("disk sequential read: %d MiB/s" % round(r["bw"] / 1024))' "$work/fio.json"
else
  echo "disk sequential read: not measured (fio failed, see $work/fio.log)"
fi
rm -f "$work/fio.dat"

echo "== eval: 16 threads x 16384 keys of 4 KiB"
$bin/eval --json "$work/eval.json" 2>/dev/null | grep -E '^(write|sequential|restart|hot|total|index)'

echo "== eval: index rebuild of 1 Mi keys (16-byte values)"
$bin/eval --per-thread 65536 --value-size 16 2>/dev/null | grep -E '^(restart|index)'

echo "== redis-benchmark, 4 KiB values, 16 clients, SplitKV and Redis alternately, twice"
$bin/storage-node gen-certs --out "$work/certs" >/dev/null
# Each SplitKV pass runs on a storage node of its own, on an empty data
# directory removed after the pass: the logs keep every overwrite until
# garbage collection: a pass of 100 000 SETs of 4 KiB leaves about 700 MiB
# (160 MiB of it preallocated), and eight passes would not fit every
# machine this runs on.
store=0
start_storage() {
  store=$((store + 1))
  RUST_LOG=warn $bin/storage-node serve --listen 127.0.0.1:17000 --data-dir "$work/data-$store" \
    --certs "$work/certs/storage" 2>>"$work/storage.log" &
  storage_pid=$!
}
# The compute node keeps trying to reach the storage node while it starts.
start_compute() {
  RUST_LOG=warn $bin/compute-node serve --storage localhost:17000 --certs "$work/certs/compute" \
    --listen 127.0.0.1:16380 2>>"$work/compute.log" &
  compute_pid=$!
  wait_for "compute-node serve on 127.0.0.1:16380 (see $work/compute.log)" 30 redis-cli -p 16380 ping
}
stop() {
  kill "$1"
  wait "$1" 2>/dev/null || true
}
# fresh_splitkv: stops the SplitKV pair if one runs, removes its data, and
# starts a new pair on an empty data directory.
fresh_splitkv() {
  if [ "$store" -gt 0 ]; then
    stop "$compute_pid"
    stop "$storage_pid"
    rm -rf "$work/data-$store"
  fi
  start_storage
  start_compute
}
mkdir -p "$work/redis"
redis-server --port 16390 --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
  --appendfsync everysec --save '' >"$work/redis.log" 2>&1 & pids+=($!)
wait_for "redis-server on 127.0.0.1:16390 (see $work/redis.log)" 30 redis-cli -p 16390 ping
# bench NAME PORT LABEL ARGS...: one redis-benchmark run, a line per test.
bench() {
  local name=$1 port=$2 label=$3
  shift 3
  redis-benchmark -p "$port" -d 4096 -c 16 "$@" --csv 2>/dev/null | tr -d '"' |
    awk -F, -v n="$name" -v l="$label" \
      '$1=="SET"||$1=="GET"{printf "%-8s %-24s %s %8.0f ops/s\n", n, l, $1, $2}'
}
# The GETs of a run read the keys its SETs wrote: the compute node's value
# cache holds them (it is filled by the node's own writes). The latency and
# cold runs below use the storage node of the last pass.
for keys in 5000 100000; do
  for P in 1 16; do
    for round in 1 2; do
      fresh_splitkv
      bench splitkv 16380 "-r $keys -P $P (#$round)" -t set,get -P "$P" -r "$keys"
      bench redis 16390 "-r $keys -P $P (#$round)" -t set,get -P "$P" -r "$keys"
    done
  done
done
# Latency: one client, one request at a time.
for system in splitkv:16380 redis:16390; do
  redis-benchmark -p "${system#*:}" -t set,get -d 4096 -c 1 -r 5000 -n 20000 --csv 2>/dev/null |
    tr -d '"' | awk -F, -v n="${system%:*}" \
      '$1=="SET"||$1=="GET"{printf "%-8s -c 1 -r 5000 %s %8.0f ops/s  p50 %s ms  p99 %s ms\n", n, $1, $2, $5, $7}'
done
redis-cli -p 16380 info | grep -E '^(hit_ratio|cache_hits|cache_bytes|point_reads|window_fetches)' || true
# Cold: a compute node started afresh (empty cache, no windows) under random
# GETs: every first read of a key is a point read, and no window is fetched
# unless the misses are close together.
stop "$compute_pid"
start_compute
bench splitkv 16380 "cold -r 100000 -P 16" -t get -P 16 -r 100000 -n 200000
bench redis 16390 "cold -r 100000 -P 16" -t get -P 16 -r 100000 -n 200000
redis-cli -p 16380 info | grep -E '^(hit_ratio|cache_hits|point_reads|window_fetches|index_bytes_per_key)' || true
