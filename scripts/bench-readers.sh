#!/usr/bin/env bash
# Measures read-only compute nodes (readers) in one run on loopback: one
# storage node (16 partitions, defaults), one writer `compute-node serve`
# and four readers `compute-node serve --read-only`.
#   - scaling: GET ops/s with 1, 2 and 4 readers, each under its own
#     redis-benchmark GET (-c 16 -d 4096 -r 5000) at the same time, while a
#     write load goes through the writer; each reader's ops/s, their sum,
#     the writer's SET ops/s in the same interval, the readers' lag (max of
#     INFO replication samples) and where the CPU went;
#   - a stopped reader: the writer's write ops/s with the readers idle (a),
#     with one reader SIGSTOPped for the whole measurement (b), and with all
#     of them running again (c); b/a and b/c, the storage node's RSS around
#     (b), and how long the stopped reader takes to catch up once continued.
# The write load is redis-benchmark SET -d 4096 -c 16 -r 5000 through the
# writer, stopped after a fixed time: `eval run --resp` has neither a
# write-only mode nor a duration (its write phase is followed by its read
# phases, on the same server), and `eval durability-write` writes through a
# single connection and journals every key. The eval write phase is the
# same shape (16 clients, 4 KiB, one request at a time each).
# Rates come from the servers' own counters (INFO: `puts` on the writer,
# `reads` on a reader) over the same interval, not from redis-benchmark.
# Usage: scripts/bench-readers.sh [WORKDIR]   (about two minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
work_dir "${1:-}"
need redis-benchmark redis-tools redis-cli redis-tools

# Seconds of each measurement: a scaling step, and one of (a), (b), (c).
# (b) lasts longer than 10 s, the storage node's --follow-stall-ms and the
# QUIC idle timeout, so the storage node gives up on the stopped reader
# during it.
read_secs=5
stop_secs=15
keys=5000

cargo build --release -q -p storage-node -p compute-node -p eval
bin=target/release
pids=()     # servers, in the order they started
clients=()  # redis-benchmark runs under way
readers=(16581 16582 16583 16584)
reader_pids=()
cleanup() {
  local status=$?
  # A stopped process only sees SIGTERM once continued.
  for p in "${reader_pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  # Clients, compute nodes, the storage node last.
  local i
  for p in "${clients[@]}"; do kill "$p" 2>/dev/null || true; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  remove_own_work "$status"
}
trap cleanup EXIT

$bin/storage-node gen-certs --out "$work/certs" >/dev/null
RUST_LOG=warn $bin/storage-node serve --listen 127.0.0.1:17200 --data-dir "$work/data" \
  --certs "$work/certs/storage" 2>"$work/storage.log" &
storage=$!
pids+=("$storage")
# The compute nodes keep trying to reach the storage node while it starts.
RUST_LOG=warn $bin/compute-node serve --storage localhost:17200 --certs "$work/certs/compute" \
  --listen 127.0.0.1:16580 2>"$work/writer.log" &
writer=$!
pids+=("$writer")
wait_for "compute-node serve on 127.0.0.1:16580 (see $work/writer.log)" 30 redis-cli -p 16580 ping
for i in "${!readers[@]}"; do
  RUST_LOG=warn $bin/compute-node serve --read-only --storage localhost:17200 \
    --certs "$work/certs/compute" --listen "127.0.0.1:${readers[$i]}" \
    2>"$work/reader$((i + 1)).log" &
  reader_pids+=($!)
  pids+=($!)
done
for i in "${!readers[@]}"; do
  wait_for "reader on 127.0.0.1:${readers[$i]} (see $work/reader$((i + 1)).log)" 30 \
    redis-cli -p "${readers[$i]}" ping
done

# field PORT SECTION NAME: one field of INFO SECTION of the server at PORT.
field() {
  timeout 5 redis-cli -p "$1" info "$2" 2>/dev/null | tr -d '\r' |
    awk -F: -v f="$3" '$1==f{print $2}'
}
# lag PORT: "LAG_MS LAG_ENTRIES" of the reader at PORT, -1 for unknown.
lag() {
  timeout 5 redis-cli -p "$1" info replication 2>/dev/null | tr -d '\r' | awk -F: '
    $1=="splitkv_lag_ms"{ms=$2} $1=="splitkv_lag_entries"{e=$2}
    END{print (ms ~ /^[0-9]+$/ ? ms : -1), (e ~ /^[0-9]+$/ ? e : -1)}'
}
# caught_up PORT SEQ: the reader at PORT has applied SEQ and has nothing
# left to apply (as eval's readers check it).
caught_up() {
  local seq entries
  seq=$(field "$1" replication splitkv_applied_seq)
  entries=$(field "$1" replication splitkv_lag_entries)
  [ "${seq:-0}" -ge "$2" ] && [ "$entries" = 0 ]
}
now() { date +%s.%N; }
# rss_kib PID [FIELD]: VmRSS (or FIELD, e.g. RssAnon: what the process
# allocated itself, not its mapped files) in KiB.
rss_kib() { awk -v f="${2:-VmRSS}:" '$1==f{print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN{printf "%.1f MiB", k/1024}'; }
# ticks PID...: CPU time (user + system) of the processes, in clock ticks.
ticks() {
  local t=0 p s f
  for p in "$@"; do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    read -r -a f <<<"${s##*) }"
    t=$((t + f[11] + f[12]))
  done
  echo "$t"
}
# machine: "BUSY TOTAL" ticks of all CPUs (/proc/stat).
machine() { awk '$1=="cpu"{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat; }
hz=$(getconf CLK_TCK)
cores=$(nproc)
# pct TICKS SECONDS: percent of one core.
pct() { awk -v t="$1" -v s="$2" -v h="$hz" 'BEGIN{printf "%.0f", 100*t/h/s}'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.0f", n/s}'; }

# The write load, until stop_writes.
start_writes() {
  redis-benchmark -p 16580 -t set -d 4096 -c 16 -r "$keys" -n 1000000000 -q >/dev/null 2>&1 &
  writes=$!
  clients+=("$writes")
}
stop_writes() {
  kill "$writes" 2>/dev/null || true
  wait "$writes" 2>/dev/null || true
  clients=()
}
# wait_caught_up SECONDS PORT...: waits until every reader has applied what
# the writer has now; sets `caught` to how long that took.
wait_caught_up() {
  local limit=$1 seq t0 p
  shift
  seq=$(field 16580 replication splitkv_applied_seq)
  t0=$(now)
  for p in "$@"; do
    for _ in $(seq $((limit * 20))); do
      caught_up "$p" "$seq" && break
      sleep 0.05
    done
    caught_up "$p" "$seq" || { echo "reader on $p did not catch up within $limit s" >&2; exit 1; }
  done
  caught=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.2f s", b-a}')
}

echo "== preload: $keys keys of 4 KiB through the writer, readers warmed"
redis-benchmark -p 16580 -t set -d 4096 -c 16 -r "$keys" -n $((keys * 12)) -q 2>/dev/null |
  tr '\r' '\n' | grep -E '^SET: [0-9.]+ requests' | awk '{printf "writer SET %.0f ops/s (redis-benchmark), ", $2}'
echo "writer keys $(field 16580 keyspace db0 | sed 's/,.*//')"
wait_caught_up 30 "${readers[@]}"
echo "readers caught up in $caught"
for p in "${readers[@]}"; do
  redis-benchmark -p "$p" -t get -d 4096 -c 16 -r "$keys" -n 20000 -q >/dev/null 2>&1
done
echo "readers: $(for p in "${readers[@]}"; do printf '%s ' "$(field "$p" keyspace db0 | sed 's/,.*//')"; done)"

# Scaling: one line per reader count, for the summary.
summary=()
for n in 1 2 4; do
  if [ "$n" = 1 ]; then on="reader 1"; else on="readers 1-$n at once"; fi
  echo "== $n reader(s): GET -c 16 -d 4096 -r $keys on $on, SET -c 16 -d 4096 through the writer, $read_secs s"
  active=("${readers[@]:0:n}")
  start_writes
  gets=()
  for p in "${active[@]}"; do
    redis-benchmark -p "$p" -t get -d 4096 -c 16 -r "$keys" -n 1000000000 -q >/dev/null 2>&1 &
    gets+=($!)
    clients+=($!)
  done
  sleep 1
  r0=() h0=() m0=() lag_ms=() lag_entries=()
  for i in "${!readers[@]}"; do
    r0[i]=$(field "${readers[$i]}" splitkv reads)
    h0[i]=$(field "${readers[$i]}" splitkv read_hits)
    m0[i]=$(field "${readers[$i]}" splitkv read_misses)
    lag_ms[i]=-1 lag_entries[i]=-1
  done
  w0=$(field 16580 splitkv puts)
  c0_storage=$(ticks "$storage") c0_writer=$(ticks "$writer") c0_clients=$(ticks "$writes" "${gets[@]}")
  c0_readers=()
  for i in "${!reader_pids[@]}"; do c0_readers[i]=$(ticks "${reader_pids[$i]}"); done
  read -r b0 t0m <<<"$(machine)"
  t0=$(now)
  samples=0
  while awk -v a="$t0" -v b="$(now)" -v s="$read_secs" 'BEGIN{exit !(b-a<s)}'; do
    for i in "${!readers[@]}"; do
      read -r ms entries <<<"$(lag "${readers[$i]}")"
      [ "$ms" -gt "${lag_ms[$i]}" ] && lag_ms[i]=$ms
      [ "$entries" -gt "${lag_entries[$i]}" ] && lag_entries[i]=$entries
    done
    samples=$((samples + 1))
    sleep 0.2
  done
  t1=$(now)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
  w1=$(field 16580 splitkv puts)
  c1_storage=$(ticks "$storage") c1_writer=$(ticks "$writer") c1_clients=$(ticks "$writes" "${gets[@]}")
  read -r b1 t1m <<<"$(machine)"
  sum=0 max_ms=0 max_entries=0 reader_cpu=""
  for i in "${!readers[@]}"; do
    r1=$(field "${readers[$i]}" splitkv reads)
    h1=$(field "${readers[$i]}" splitkv read_hits)
    m1=$(field "${readers[$i]}" splitkv read_misses)
    reader_cpu+="$(pct $(($(ticks "${reader_pids[$i]}") - c0_readers[i])) "$secs") "
    if [ "$i" -lt "$n" ]; then
      ops=$(rate $((r1 - r0[i])) "$secs")
      sum=$((sum + ops))
      [ "${lag_ms[$i]}" -gt "$max_ms" ] && max_ms=${lag_ms[$i]}
      [ "${lag_entries[$i]}" -gt "$max_entries" ] && max_entries=${lag_entries[$i]}
      printf 'reader %d  GET %8d ops/s  from memory %6s %%  lag max %s ms, %s entries\n' $((i + 1)) "$ops" \
        "$(awk -v h=$((h1 - h0[i])) -v m=$((m1 - m0[i])) 'BEGIN{printf "%.2f", h+m ? 100*h/(h+m) : 0}')" \
        "${lag_ms[$i]}" "${lag_entries[$i]}"
    else
      printf 'reader %d  idle (following)                     lag max %s ms, %s entries\n' $((i + 1)) \
        "${lag_ms[$i]}" "${lag_entries[$i]}"
    fi
  done
  for p in "${gets[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  stop_writes
  set_ops=$(rate $((w1 - w0)) "$secs")
  printf 'readers   GET %8d ops/s (sum)\n' "$sum"
  printf 'writer    SET %8d ops/s\n' "$set_ops"
  busy=$(awk -v b=$((b1 - b0)) -v t=$((t1m - t0m)) -v c="$cores" 'BEGIN{printf "%.0f", t ? 100*c*b/t : 0}')
  echo "cpu, % of one core over ${secs} s ($samples lag samples): storage $(pct $((c1_storage - c0_storage)) "$secs")," \
    "writer $(pct $((c1_writer - c0_writer)) "$secs"), readers 1-4 ${reader_cpu% }," \
    "redis-benchmark $(pct $((c1_clients - c0_clients)) "$secs"); machine busy $busy of $((cores * 100))" \
    "(the rest: other processes, redis-cli samples)"
  summary+=("$(printf '%7d %13d %11d %13d %11s %12s %8s' "$n" "$sum" $((sum / n)) "$set_ops" "$max_ms" "$max_entries" "$busy")")
  wait_caught_up 30 "${readers[@]}"
done
echo "== scaling side by side (lag: max over the active readers' samples; cpu: machine busy % of $((cores * 100)))"
echo "readers  GET ops/s sum  per reader  writer SET/s  lag max ms  lag entries  cpu"
printf '%s\n' "${summary[@]}"

# measure_writes LABEL: the writer's SET ops/s over stop_secs, after a
# second of warm-up; per-second figures, CPU and the storage node's RSS
# (its logs are mapped, so it grows with the data too; RssAnon leaves the
# mapped files out). Sets `measured`, `rss_before`, `rss_peak` and
# `rss_after`.
measure_writes() {
  local label=$1 p0 t0 p1 prev cur per=() lo hi c0w c1w c0r c1r
  local c0 c1 b0 b1 t0m t1m secs anon_before anon_peak anon_after
  rss_before=$(rss_kib "$storage")
  rss_peak=$rss_before
  anon_before=$(rss_kib "$storage" RssAnon)
  anon_peak=$anon_before
  start_writes
  sleep 1
  p0=$(field 16580 splitkv puts)
  t0=$(now)
  c0=$(ticks "$storage") c0w=$(ticks "$writer") c0r=$(ticks "${reader_pids[@]}")
  read -r b0 t0m <<<"$(machine)"
  prev=$p0
  for _ in $(seq "$stop_secs"); do
    sleep 1
    cur=$(field 16580 splitkv puts)
    per+=($((cur - prev)))
    prev=$cur
    cur=$(rss_kib "$storage")
    [ "$cur" -gt "$rss_peak" ] && rss_peak=$cur
    cur=$(rss_kib "$storage" RssAnon)
    [ "$cur" -gt "$anon_peak" ] && anon_peak=$cur
  done
  p1=$(field 16580 splitkv puts)
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.3f", b-a}')
  measured=$(rate $((p1 - p0)) "$secs")
  c1=$(ticks "$storage") c1w=$(ticks "$writer") c1r=$(ticks "${reader_pids[@]}")
  read -r b1 t1m <<<"$(machine)"
  stop_writes
  rss_after=$(rss_kib "$storage")
  anon_after=$(rss_kib "$storage" RssAnon)
  lo=$(printf '%s\n' "${per[@]}" | sort -n | head -1)
  hi=$(printf '%s\n' "${per[@]}" | sort -n | tail -1)
  printf '%-32s SET %6d ops/s  (per second: min %d, max %d)  cpu %%: storage %s, writer %s, readers %s, machine %s\n' \
    "$label" "$measured" "$lo" "$hi" "$(pct $((c1 - c0)) "$secs")" "$(pct $((c1w - c0w)) "$secs")" \
    "$(pct $((c1r - c0r)) "$secs")" \
    "$(awk -v b=$((b1 - b0)) -v t=$((t1m - t0m)) -v c="$cores" 'BEGIN{printf "%.0f", t ? 100*c*b/t : 0}')"
  echo "    storage node RSS: before $(mib "$rss_before"), peak $(mib "$rss_peak"), after $(mib "$rss_after")"
  echo "    storage node RssAnon: before $(mib "$anon_before"), peak $(mib "$anon_peak"), after $(mib "$anon_after")"
}

echo "== a stopped reader: writer SET -c 16 -d 4096 -r $keys, $stop_secs s each, readers idle"
measure_writes "(a) 4 readers running"
a=$measured
wait_caught_up 30 "${readers[@]}"
stopped=${reader_pids[3]}
warnings0=$(grep -ciE 'warn' "$work/storage.log" || true)
lines0=$(wc -l <"$work/reader4.log")
kill -STOP "$stopped"
measure_writes "(b) reader 4 stopped (SIGSTOP)"
b=$measured
kill -CONT "$stopped"
warnings1=$(grep -ciE 'warn' "$work/storage.log" || true)
echo "storage node warnings during (b): $((warnings1 - warnings0))"
grep -iE 'warn' "$work/storage.log" | tail -n +$((warnings0 + 1)) | head -3 | cut -c1-200 || true
wait_caught_up 60 "${readers[3]}"
echo "reader 4 caught up $caught after SIGCONT; its log since the SIGSTOP: $(($(wc -l <"$work/reader4.log") - lines0)) line(s)"
tail -n +$((lines0 + 1)) "$work/reader4.log" | sed -E 's/^[^ ]+ +//; s/ partition=[0-9]+$//' | sort | uniq -c | head -3
wait_caught_up 30 "${readers[@]}"
measure_writes "(c) 4 readers running again"
c=$measured
awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN{printf "b/a %.3f   b/c %.3f\n", b/a, b/c}'
echo "storage node RSS now $(mib "$(rss_kib "$storage")")"
