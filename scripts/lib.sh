# shellcheck shell=bash
# Helpers shared by the scripts; source it (bash).

# need CMD PACKAGE [CMD PACKAGE ...]: installs with apt, in one go, every
# PACKAGE whose CMD is missing. CMD is a command name, or the absolute path
# of an executable (for tools outside PATH). `apt-get update` runs at most
# once per script.
need() {
  if [ $(($# % 2)) -ne 0 ]; then
    echo "need: expected CMD PACKAGE pairs, got: $*" >&2
    return 1
  fi
  local missing=()
  while [ $# -gt 0 ]; do
    case $1 in
      /*) [ -x "$1" ] || missing+=("$2") ;;
      *) command -v "$1" >/dev/null 2>&1 || missing+=("$2") ;;
    esac
    shift 2
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "${need_apt_updated:-}" ]; then
    apt-get update -qq >/dev/null
    need_apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# wait_for WHAT SECONDS CMD [ARG ...]: runs CMD every half second until it
# succeeds; after SECONDS without success, says that WHAT never answered
# and exits the script with an error.
wait_for() {
  local what=$1 seconds=$2
  shift 2
  local tries=$((seconds * 2))
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "$(basename "$0"): $what did not answer within $seconds s" >&2
  exit 1
}

# work_dir [DIR]: sets $work to DIR, or to a new temporary directory that
# remove_own_work deletes (call it from the script's EXIT trap); a DIR
# given by the user is kept.
work_dir() {
  if [ $# -ge 1 ] && [ -n "$1" ]; then
    work=$1 own_work=
  else
    work=$(mktemp -d) own_work=1
  fi
  mkdir -p "$work"
}

# remove_own_work STATUS: if work_dir made $work, deletes it when STATUS
# is 0; otherwise deletes only the data (data*/, redis/) and says where the
# logs are.
remove_own_work() {
  if [ -z "${own_work:-}" ] || [ -z "${work:-}" ]; then return 0; fi
  if [ "$1" -eq 0 ]; then
    rm -rf "$work"
  else
    rm -rf "$work"/data* "$work/redis"
    echo "$(basename "$0"): logs kept in $work" >&2
  fi
}

# need_free_mib DIR MIB: exits the script with a clear message unless the
# file system of DIR has at least MIB MiB free.
need_free_mib() {
  local free_mib
  free_mib=$(df -Pm "$1" | awk 'NR==2{print $4}')
  if [ "$free_mib" -lt "$2" ]; then
    echo "$(basename "$0"): needs $2 MiB free under $1, has $free_mib MiB" >&2
    exit 1
  fi
}

# Processes started by start_splitkv and start_redis (and any a script adds
# to `started`), stopped by stop_started.
started=()

# stop_started: the EXIT trap of a script that starts servers: stops every
# process in `started` and hands the exit status to remove_own_work.
stop_started() {
  local status=$?
  for p in "${started[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  remove_own_work "$status"
}

# start_splitkv STORAGE_PORT RESP_PORT [COMPUTE_ARG ...]: starts a storage
# node on a fresh data directory under $work (certificates made once) and a
# compute node serving RESP on RESP_PORT in front of it, with the extra
# arguments; waits until it answers. Sets storage_pid and compute_pid; logs
# go to $work/storage.log and $work/compute.log. Uses $bin.
start_splitkv() {
  local storage_port=$1 resp_port=$2
  shift 2
  [ -d "$work/certs" ] || "$bin/storage-node" gen-certs --out "$work/certs" >/dev/null
  RUST_LOG=warn "$bin/storage-node" serve --listen "127.0.0.1:$storage_port" \
    --data-dir "$work/data" --certs "$work/certs/storage" 2>>"$work/storage.log" &
  storage_pid=$!
  started+=("$storage_pid")
  RUST_LOG=warn "$bin/compute-node" serve --storage "localhost:$storage_port" \
    --certs "$work/certs/compute" --listen "127.0.0.1:$resp_port" "$@" 2>>"$work/compute.log" &
  compute_pid=$!
  started+=("$compute_pid")
  wait_for "compute-node serve on 127.0.0.1:$resp_port (see $work/compute.log)" 30 \
    redis-cli -p "$resp_port" ping
}

# start_redis PORT [ARG ...]: starts redis-server with AOF (everysec) in
# $work/redis, with the extra arguments; waits until it answers. Sets
# redis_pid; its log is $work/redis.log.
start_redis() {
  local port=$1
  shift
  mkdir -p "$work/redis"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
    --appendfsync everysec --save '' "$@" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  started+=("$redis_pid")
  wait_for "redis-server on 127.0.0.1:$port (see $work/redis.log)" 30 redis-cli -p "$port" ping
}
