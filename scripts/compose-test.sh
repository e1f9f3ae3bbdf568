#!/usr/bin/env bash
# Brings the docker-compose deployment up for real and tests it, on a machine
# without a Docker engine: Debian's podman (with runc) serves the Docker API
# on a unix socket and Debian's docker-compose drives it. Run as root.
#
#  1. installs podman, runc, docker-compose, debootstrap and friends
#     (iproute2 for podman-health-loop.sh, python3 for the report check);
#  2. starts `podman system service` with configuration files of its own
#     (nothing under /etc is changed);
#  3. makes the base image with debootstrap (no registry is needed) and
#     builds the images from host-built release binaries;
#  4. starts certs, storage, compute and two compute-ro readers
#     (--scale compute-ro=2); checks that the storage node uses io_uring
#     (the shipped seccomp profile allows it); runs the evaluator over RESP
#     and checks its report; checks the compute node with redis-cli from
#     another container; writes a key through compute and reads it through
#     each reader, which refuses writes; runs the evaluator writing through
#     compute and reading through the readers;
#  5. kills the storage container with SIGKILL while a writer runs, brings
#     it back with compose, and checks that every acknowledged write is
#     there;
#  6. takes everything down (also when a step fails).
# Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=${SPLITKV_COMPOSE_STATE:-/tmp/splitkv-compose}
rootfs_cache=${SPLITKV_ROOTFS_CACHE:-/var/cache/splitkv/rootfs-bookworm}
export COMPOSE_PROJECT_NAME=splitkvtest
t0=$(date +%s)
step() { printf '\n== [%4ds] %s\n' "$(($(date +%s) - t0))" "$*"; }
fail() { echo "compose-test: FAILED: $*" >&2; exit 1; }
# Unmounts (lazily) everything mounted under directory $1.
unmount_under() {
  grep -o " $1/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"

step "packages"
need podman podman runc runc docker-compose docker-compose debootstrap debootstrap \
  /usr/lib/podman/netavark netavark /usr/lib/podman/aardvark-dns aardvark-dns \
  iptables iptables catatonit catatonit curl curl ip iproute2 python3 python3

step "podman configuration and service"
service_pid=""
loop_pid=""
cleanup() {
  local status=$?
  set +e
  if [ -n "$service_pid" ]; then
    (cd "$root" && timeout 120 docker-compose --profile eval --profile tools down -v >/dev/null 2>&1)
  fi
  [ -n "$loop_pid" ] && kill "$loop_pid" 2>/dev/null
  if [ -n "$service_pid" ]; then
    kill -TERM "$service_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$service_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  unmount_under "$state"
  [ "$status" = 0 ] && echo "compose-test: passed" || echo "compose-test: failed ($status)"
  exit "$status"
}
trap cleanup EXIT
if [ -f "$state/service.pid" ]; then kill "$(cat "$state/service.pid")" 2>/dev/null || true; sleep 1; fi
unmount_under "$state"
rm -rf "$state" /run/containers/networks
mkdir -p "$state/out"
cat > "$state/containers.conf" <<EOF
[containers]
# podman's default ulimits exceed what this kind of machine allows
default_ulimits = []
log_driver = "k8s-file"
# docker-compose passes a security_opt seccomp profile inline, which
# podman 4.3's Docker API cannot take; the shipped profile is given here
seccomp_profile = "$root/deploy/seccomp-iouring.json"

[network]
network_backend = "netavark"
network_config_dir = "$state/networks"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$state/events.log"
tmp_dir = "$state/tmp"
volume_path = "$state/volumes"
EOF
cat > "$state/storage.conf" <<EOF
[storage]
driver = "overlay"
runroot = "$state/runroot"
graphroot = "$state/graphroot"
EOF
export CONTAINERS_CONF=$state/containers.conf
export CONTAINERS_STORAGE_CONF=$state/storage.conf
export DOCKER_HOST=unix://$state/podman.sock
export COMPOSE_DOCKER_CLI_BUILD=0
export SPLITKV_SECCOMP_OPT=label=disable
export SPLITKV_BINARIES=prebuilt
export SPLITKV_OUT_DIR=$state/out
export SPLITKV_RESP_PORT=16379
podman system service --time=0 "$DOCKER_HOST" >"$state/service.log" 2>&1 &
service_pid=$!
echo "$service_pid" >"$state/service.pid"
for _ in $(seq 100); do curl -sf --unix-socket "$state/podman.sock" http://d/_ping >/dev/null && break; sleep 0.1; done
curl -sf --unix-socket "$state/podman.sock" http://d/_ping >/dev/null || fail "podman service did not start"

step "base image (debootstrap, cached in $rootfs_cache)"
# debootstrap works in a directory of its own, moved into place only once
# it succeeded: a half-made tree is never taken for the cache.
if [ ! -x "$rootfs_cache/bin/sh" ]; then
  unmount_under "$rootfs_cache.tmp"
  rm -rf --one-file-system "$rootfs_cache" "$rootfs_cache.tmp"
  mkdir -p "$(dirname "$rootfs_cache")"
  debootstrap --variant=minbase bookworm "$rootfs_cache.tmp" >"$state/debootstrap.log" 2>&1 ||
    { tail -20 "$state/debootstrap.log"; unmount_under "$rootfs_cache.tmp"; fail "debootstrap"; }
  mv "$rootfs_cache.tmp" "$rootfs_cache"
fi
tar -C "$rootfs_cache" -c . | podman import -q - docker.io/library/debian:bookworm-slim >/dev/null

step "images (release binaries built on this host)"
cd "$root"
cargo build --release -q -p storage-node -p compute-node -p eval
docker-compose --profile tools build -q storage tools >/dev/null

step "up: certs, storage, compute, compute-ro x2"
chown 10001 "$state/out"
"$root/scripts/podman-health-loop.sh" 1 >"$state/health-loop.log" 2>&1 &
loop_pid=$!
readers=2
timeout 240 docker-compose up -d --scale compute-ro=$readers >/dev/null || fail "docker-compose up"
# container SERVICE [INDEX]: the name compose gave a service's container.
container() { echo "${COMPOSE_PROJECT_NAME}_$1_${2:-1}"; }
health() { podman inspect -f '{{.State.Status}} {{.State.Health.Status}}' "$(container "$@")" 2>/dev/null; }
# wait_healthy SERVICE [INDEX]
wait_healthy() {
  for _ in $(seq 120); do [ "$(health "$@")" = "running healthy" ] && return 0; sleep 1; done
  docker-compose logs --no-color --tail=30 "$1"
  fail "$(container "$@") did not become healthy ($(health "$@"))"
}
wait_healthy storage
wait_healthy compute
for i in $(seq "$readers"); do wait_healthy compute-ro "$i"; done
# Each reader's address on the compose network (the name compute-ro
# stands for any one of them).
reader_ips=()
for i in $(seq "$readers"); do
  ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(container compute-ro "$i")")
  [ -n "$ip" ] || fail "no address for $(container compute-ro "$i")"
  reader_ips+=("$ip")
done
echo "readers at ${reader_ips[*]}"

step "the storage node uses io_uring, not the fallback"
# The logs are read whole before grep looks at them: with pipefail, a
# `grep -q` that stops early would fail the pipeline through SIGPIPE.
storage_log=$(docker-compose logs --no-color storage)
grep -q 'storage node serving.*io_engine=uring' <<<"$storage_log" ||
  { tail -20 <<<"$storage_log"; fail "storage node is not on io_uring"; }
grep -q 'io_uring is not available' <<<"$storage_log" && fail "io_uring fallback reported"
echo "io_engine=uring"
# The same image under podman's default profile falls back, as it should.
fallback=$(podman run --rm --security-opt seccomp=/usr/share/containers/seccomp.json \
  -v "${COMPOSE_PROJECT_NAME}_seccomp_check:/data" localhost/splitkv:latest sh -c \
  'storage-node gen-certs --out /data/c >/dev/null && timeout 3 storage-node serve --data-dir /data/d --certs /data/c/storage --listen 127.0.0.1:7000' 2>&1 || true)
podman volume rm -f "${COMPOSE_PROJECT_NAME}_seccomp_check" >/dev/null 2>&1 || true
grep -q 'io_uring is not available' <<<"$fallback" ||
  { tail -5 <<<"$fallback"; fail "without the profile io_uring should be refused"; }
echo "with podman's default seccomp profile the node reports the pwrite fallback"

step "each node has its own key and the CA certificate, never the CA's key"
podman exec "${COMPOSE_PROJECT_NAME}_storage_1" sh -c 'test -f /certs/key.pem && test -f /certs/ca.pem && ! ls /certs | grep -q ca-key' ||
  fail "storage node's certificate directory"
podman exec "${COMPOSE_PROJECT_NAME}_compute_1" sh -c 'test -f /certs/key.pem && test -f /certs/ca.pem && ! ls /certs | grep -q ca-key' ||
  fail "compute node's certificate directory"
podman exec "$(container compute-ro)" sh -c 'test -f /certs/key.pem && test -f /certs/ca.pem && ! ls /certs | grep -q ca-key' ||
  fail "reader's certificate directory"

step "the evaluator over RESP (eval service)"
SPLITKV_EVAL_PER_THREAD=400 docker-compose run --rm -T eval || fail "eval run"
python3 - "$state/out/eval.json" <<'EOF' || fail "eval report"
import json, sys
report = json.load(open(sys.argv[1]))
names = [p["name"] for p in report["phases"]]
assert names == ["write", "sequential_read", "restart", "hot_random_read"], names
for p in report["phases"]:
    assert p["errors"] == 0, p
for p in report["phases"][1::2]:
    assert p["verified"] == 16 * 400, p
print("eval report: %d phases, all verified, %.2f s" % (len(names), report["total_seconds"]))
EOF

step "redis-cli from another container"
[ "$(docker-compose run --rm -T tools redis-cli -h compute ping | tr -d '\r')" = PONG ] || fail "PING"
docker-compose run --rm -T tools redis-cli -h compute set compose-key compose-value >/dev/null
[ "$(docker-compose run --rm -T tools redis-cli -h compute get compose-key | tr -d '\r')" = compose-value ] || fail "GET"
echo "PING, SET, GET answered"

step "reads through the readers, writes refused there"
# A reader applies a write shortly after compute acknowledged it: each read
# is retried, a bounded number of times, until the value is there.
docker-compose run --rm -T tools sh -c '
  set -eu
  redis-cli -h compute set ro-key ro-value >/dev/null
  for host in compute-ro "$@"; do
    tries=0
    until [ "$(redis-cli -h "$host" get ro-key)" = ro-value ]; do
      tries=$((tries + 1))
      [ "$tries" -lt 200 ] || { echo "$host: ro-key not visible after $tries reads"; exit 1; }
      sleep 0.05
    done
    refused=$(redis-cli -h "$host" set ro-key other 2>&1 || true)
    case $refused in
      READONLY*) ;;
      *) echo "$host: SET answered \"$refused\""; exit 1 ;;
    esac
    role=$(redis-cli -h "$host" info replication | tr -d "\r" | grep "^role:")
    [ "$role" = role:slave ] || { echo "$host: $role"; exit 1; }
    echo "$host: read ro-key after $tries retries; SET refused: $refused"
  done
  [ "$(redis-cli -h compute get ro-key)" = ro-value ] || { echo "compute: ro-key changed"; exit 1; }
' sh "${reader_ips[@]}" || fail "reading through the readers"

step "the evaluator writing through compute, reading through the readers"
reader_list=$(printf '%s:6379,' "${reader_ips[@]}")
docker-compose run --rm -T eval eval run --resp compute:6379 --readers "${reader_list%,}" \
  --per-thread 400 --json /out/eval-readers.json || fail "eval run with readers"
python3 - "$state/out/eval-readers.json" "$readers" <<'EOF' || fail "eval report with readers"
import json, sys
report = json.load(open(sys.argv[1]))
readers = int(sys.argv[2])
for p in report["phases"]:
    assert p["errors"] == 0, p
    # (the restart phase counts every key, those written before too)
    assert p["verified"] >= 16 * 400, p
waits = report["catch_ups"]
assert [c["before"] for c in waits] == ["sequential_read", "hot_random_read"], waits
for c in waits:
    assert len(c["readers"]) == readers, c
    for r in c["readers"]:
        assert r["last"]["applied_seq"] >= c["writer_applied_seq"], r
        assert r["last"]["lag_entries"] == 0, r
print("eval report with %d readers: all verified; caught up in %s s" %
      (readers, ", ".join("%.3f" % c["seconds"] for c in waits)))
EOF

step "kill -9 of the storage container during a write run"
docker-compose run --rm -T eval eval durability-write --resp compute:6379 --journal /out/journal \
  --seconds 25 >"$state/writer.log" 2>&1 &
writer=$!
sleep 6
storage="${COMPOSE_PROJECT_NAME}_storage_1"
if command -v docker >/dev/null 2>&1; then docker kill -s KILL "$storage" >/dev/null; else podman kill --signal KILL "$storage" >/dev/null; fi
echo "killed $storage"
sleep 2
timeout 120 docker-compose up -d storage >/dev/null || fail "bringing the storage node back"
wait_healthy storage
wait "$writer" || { cat "$state/writer.log"; fail "the writer did not recover"; }
cat "$state/writer.log"
docker-compose run --rm -T eval eval durability-verify --resp compute:6379 --journal /out/journal ||
  fail "acknowledged writes lost"

step "down"
timeout 120 docker-compose --profile eval --profile tools down -v >/dev/null
