#!/usr/bin/env bash
# Measures the compute node in one run on loopback, next to its references:
#   - the raw QUIC bulk figure (storage-node bench-transport),
#   - sequential and hot reads through the windows (eval, 16 threads, 4 KiB),
#   - index rebuild of 1 Mi keys (eval's restart phase, 16-byte values),
#   - redis-benchmark SET/GET, 4 KiB, 16 clients, -P 1 and -P 16, against
#     `compute-node serve` and against redis-server (AOF, everysec).
# Usage: scripts/bench-compute.sh [WORKDIR]   (a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
need redis-server redis-server redis-benchmark redis-tools redis-cli redis-tools

cargo build --release -q -p storage-node -p compute-node -p eval
bin=target/release
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

echo "== transport (raw QUIC bulk, one stream)"
$bin/storage-node bench-transport --dir "$work" --seconds 2 --rounds 3 2>/dev/null | grep -E '^[12]\.'

echo "== eval: 16 threads x 16384 keys of 4 KiB"
$bin/eval --json "$work/eval.json" 2>/dev/null | grep -E '^(write|sequential|restart|hot|total|index)'

echo "== eval: index rebuild of 1 Mi keys (16-byte values)"
$bin/eval --per-thread 65536 --value-size 16 2>/dev/null | grep -E '^(restart|index)'

echo "== redis-benchmark, 4 KiB values, 16 clients"
$bin/storage-node gen-certs --out "$work/certs" >/dev/null
RUST_LOG=warn $bin/storage-node serve --listen 127.0.0.1:17000 --data-dir "$work/data" \
  --certs "$work/certs/storage" 2>"$work/storage.log" & pids+=($!)
# The compute node keeps trying to reach the storage node while it starts.
RUST_LOG=warn $bin/compute-node serve --storage localhost:17000 --certs "$work/certs/compute" \
  --listen 127.0.0.1:16380 2>"$work/compute.log" & pids+=($!)
mkdir -p "$work/redis"
redis-server --port 16390 --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
  --appendfsync everysec --save '' >"$work/redis.log" 2>&1 & pids+=($!)
wait_for "compute-node serve on 127.0.0.1:16380 (see $work/compute.log)" 30 redis-cli -p 16380 ping
wait_for "redis-server on 127.0.0.1:16390 (see $work/redis.log)" 30 redis-cli -p 16390 ping
# First the command as given (redis-benchmark's one key, "key:__rand_int__"),
# then 10,000 random keys: a GET then reads records spread over every
# partition's log, and the first second of it waits for the windows to load.
for keys in one 10000; do
  range=()
  [ "$keys" = one ] || range=(-r "$keys")
  for port in 16380 16390; do
    name=$([ "$port" = 16380 ] && echo splitkv || echo redis)
    for P in 1 16; do
      redis-benchmark -p "$port" -t set,get -d 4096 -c 16 -P "$P" "${range[@]}" --csv 2>/dev/null |
        tr -d '"' | awk -F, -v n="$name" -v P="$P" -v k="$keys" \
          '$1=="SET"||$1=="GET"{printf "%-8s keys %-5s -P %-2s %s %8.0f ops/s\n", n, k, P, $1, $2}'
    done
  done
done
redis-cli -p 16380 info | grep -E '^(hit_ratio|point_reads|window_fetches|index_bytes_per_key)' || true
