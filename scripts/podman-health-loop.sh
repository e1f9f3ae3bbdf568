#!/usr/bin/env bash
# Runs beside a podman-backed docker-compose deployment on a machine without
# systemd (see scripts/compose-test.sh). Every INTERVAL seconds it
#  1. runs the healthchecks of running containers: podman schedules them
#     with systemd timers, so without this `condition: service_healthy`
#     waits for ever;
#  2. pins the MAC address of each podman bridge: a Linux bridge otherwise
#     takes the lowest MAC of its ports, which changes whenever a container
#     starts or stops, and the other containers' ARP entry for the gateway
#     (which answers DNS) goes stale for tens of seconds.
# Usage: podman-health-loop.sh [INTERVAL]   (with the podman environment set)
interval=${1:-1}
while :; do
  for br in /sys/class/net/podman*; do
    [ -e "$br/bridge" ] || continue
    if [ "$(cat "$br/addr_assign_type")" != 3 ]; then
      ip link set dev "${br##*/}" address "$(cat "$br/address")" 2>/dev/null || true
    fi
  done
  for id in $(podman ps -q --filter health=starting --filter health=healthy --filter health=unhealthy 2>/dev/null); do
    podman healthcheck run "$id" >/dev/null 2>&1 || true
  done
  sleep "$interval"
done
