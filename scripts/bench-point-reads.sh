#!/usr/bin/env bash
# Point reads on the storage node: a compute node without a value cache
# (`--cache-bytes 0`, so every GET of a random key is a point read) in front
# of a fresh storage node. 100 000 keys of 4 KiB are SET, then read twice
# with redis-benchmark GET: the first pass reads each record from the disk
# (the value log is written with O_DIRECT, past the page cache), the second
# from the storage node's page cache. Prints both and their ratio.
# Usage: scripts/bench-point-reads.sh [WORKDIR]   (about half a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
need redis-benchmark redis-tools redis-cli redis-tools

cargo build --release -q -p storage-node -p compute-node
bin=target/release
trap stop_started EXIT

start_splitkv 17200 16580 --cache-bytes 0

redis-benchmark -p 16580 -t set -d 4096 -c 16 -P 16 -r 100000 -n 400000 -q >/dev/null
ops() {
  redis-benchmark -p 16580 -t get -d 4096 -c 16 -P 16 -r 100000 -n 200000 --csv |
    tr -d '"' | awk -F, '$1=="GET"{print $2}'
}
first=$(ops)
again=$(ops)
awk -v a="$first" -v b="$again" 'BEGIN {
  printf "GET, records from the disk:       %9.0f ops/s\n", a
  printf "GET, records from the page cache: %9.0f ops/s (%.2fx)\n", b, b / a }'
