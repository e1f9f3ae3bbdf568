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
