#!/usr/bin/env bash
# The collection commands next to Redis: redis-benchmark's list, set, hash
# and sorted-set tests (-d 64 -c 16, -P 1 and -P 16) against a compute node
# with its storage node, and against redis-server with AOF everysec, one
# after the other in the same run; prints ops/s of each and their ratio.
# redis-benchmark's tests push to, add to and pop from one key each
# (`mylist`, `myset`, …): REQUESTS stays small because a change to a
# collection rewrites the whole collection (README, "Data types").
# Usage: scripts/bench-collections.sh [WORKDIR] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
requests=${2:-5000}
need redis-benchmark redis-tools redis-cli redis-tools

# SPLITKV_BIN names a directory of already built binaries (e.g.
# target/release-tests); otherwise the release build is made.
if [ -n "${SPLITKV_BIN:-}" ]; then
  bin=$SPLITKV_BIN
else
  cargo build --release -q -p storage-node -p compute-node
  bin=target/release
fi
trap stop_started EXIT

start_splitkv 17300 16680
start_redis 16681
tests=lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100
run() {
  redis-cli -p "$1" flushall >/dev/null
  redis-benchmark -p "$1" -t "$tests" -d 64 -c 16 -P "$2" -n "$requests" --csv |
    tr -d '"' | awk -F, 'NR>1{gsub(/ /, "_", $1); print $1, $2}'
}
for pipeline in 1 16; do
  join <(run 16680 "$pipeline" | sort) <(run 16681 "$pipeline" | sort) |
    awk -v p="$pipeline" '{ printf "-P %-2s %-24s SplitKV %9.0f  Redis %9.0f  %.2fx\n", p, $1, $2, $3, $2 / $3 }'
done
