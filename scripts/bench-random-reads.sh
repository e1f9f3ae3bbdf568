#!/usr/bin/env bash
# Random reads of a data set twice the size of the compute node's value
# cache: a compute node with a 256 MiB cache in front of a fresh storage
# node, and redis-server (AOF everysec, the data fits its memory), each
# loaded with the same 131 072 keys of 4 KiB (512 MiB) by `eval
# random-reads --load`, then read by 16 clients with Zipf 0.99 and with
# uniform keys, every value verified, alternately twice. Prints GET/s,
# latency and the compute node's value-cache hit ratio.
# Usage: scripts/bench-random-reads.sh [WORKDIR]   (needs 2 GiB free; a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
need redis-server redis-server redis-cli redis-tools
need_free_mib "$work" 2048

cache_mib=256
value_bytes=4096
keys=$((2 * cache_mib * 1024 * 1024 / value_bytes))

cargo build --release -q -p storage-node -p compute-node -p eval
bin=target/release
trap stop_started EXIT

start_splitkv 17300 16680 --cache-bytes $((cache_mib << 20))
start_redis 16690

reads() {
  local name=$1 port=$2
  shift 2
  $bin/eval random-reads --resp "127.0.0.1:$port" --keys "$keys" --value-size "$value_bytes" \
    --threads 16 --reads-per-thread 20000 "$@" | sed "s/^/$name: /"
}
echo "== $keys keys of $value_bytes bytes; compute-node value cache $cache_mib MiB"
for round in 1 2; do
  load=()
  [ "$round" -eq 1 ] && load=(--load)
  reads "splitkv #$round" 16680 "${load[@]}"
  reads "redis   #$round" 16690 "${load[@]}"
done
