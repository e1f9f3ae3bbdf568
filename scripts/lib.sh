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
