#!/usr/bin/env bash
# Counts what one SET and one GET cost in thread hand-offs, system calls and
# datagrams, on each SplitKV node and on redis-server (AOF, everysec) under
# the same load: redis-benchmark, 4 KiB values, 16 clients, -P 1, -r 5000.
#
# Per request and per process it prints:
#   - sleeps: voluntary context switches of all its threads (each is a thread
#     that blocked and had to be woken again: a hand-off, or an idle wait);
#   - preempted: involuntary context switches;
#   - syscalls: system calls entered (perf's raw_syscalls:sys_enter);
# and, per request for the whole machine, the UDP datagrams sent (the QUIC
# traffic between the nodes; on loopback each is also one received).
# Threads that exit during a pass are not counted in the switches.
# Usage: scripts/bench-handoffs.sh [WORKDIR] [REQUESTS]   (about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
requests=${2:-50000}
need redis-server redis-server redis-benchmark redis-tools redis-cli redis-tools perf linux-perf
need_free_mib "$work" 1024

cargo build --release -q -p storage-node -p compute-node
bin=target/release
trap stop_started EXIT

start_splitkv 17300 16680
start_redis 16690

# switches PID: "voluntary involuntary" summed over the process's threads.
switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt_switches/{v+=$2} /^nonvoluntary_ctxt_switches/{n+=$2} END{print v+0, n+0}'
}
# udp_out: UDP datagrams sent by this machine so far.
udp_out() {
  awk '/^Udp:/{if (!h) {for (i=1;i<=NF;i++) if ($i=="OutDatagrams") c=i; h=1} else print $c}' /proc/net/snmp
}

# pass NAME PORT TEST PID...: runs one redis-benchmark test against PORT
# and prints the costs per request of each PID.
pass() {
  local name=$1 port=$2 test=$3
  shift 3
  local procs=("$@") before=() perfs=() udp0 udp1
  for p in "${procs[@]}"; do
    before+=("$(switches "$p")")
    perf stat -x, -e raw_syscalls:sys_enter -p "$p" -o "$work/perf.$p" 2>/dev/null &
    perfs+=($!)
  done
  udp0=$(udp_out)
  sleep 0.5 # perf attaches
  redis-benchmark -p "$port" -t "$test" -d 4096 -c 16 -P 1 -r 5000 -n "$requests" -q >/dev/null
  udp1=$(udp_out)
  for i in "${!procs[@]}"; do
    kill -INT "${perfs[$i]}"
    wait "${perfs[$i]}" 2>/dev/null || true
  done
  for i in "${!procs[@]}"; do
    local p=${procs[$i]} role after syscalls
    role=$(tr -d '\0' <"/proc/$p/comm")
    after=$(switches "$p")
    syscalls=$(awk -F, '/raw_syscalls:sys_enter/{print $1}' "$work/perf.$p")
    echo "${before[$i]} $after ${syscalls:-0}" | awk -v n="$name" -v t="${test^^}" -v r="$role" -v q="$requests" \
      '{printf "%-8s %-4s %-14s sleeps %6.2f  preempted %5.2f  syscalls %6.2f  per request\n", n, t, r, ($3-$1)/q, ($4-$2)/q, $5/q}'
  done
  echo "$udp0 $udp1" | awk -v n="$name" -v t="${test^^}" -v q="$requests" \
    '{printf "%-8s %-4s %-14s udp datagrams sent %5.2f per request\n", n, t, "(machine)", ($2-$1)/q}'
}

echo "== $requests requests each: redis-benchmark -d 4096 -c 16 -P 1 -r 5000"
for test in set get; do
  pass splitkv 16680 "$test" "$compute_pid" "$storage_pid"
  pass redis 16690 "$test" "$redis_pid"
done
