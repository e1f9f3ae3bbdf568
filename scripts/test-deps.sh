#!/usr/bin/env bash
# Installs what the Rust tests need besides the Rust toolchain, when it is
# missing: redis-server and redis-cli (the reference of the differential
# tests) from Debian's packages, and redis-py (the Python client the
# compatibility tests drive) from PyPI. Run as root; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
need redis-server redis-server redis-cli redis-tools python3 python3
if ! python3 -c 'import redis' >/dev/null 2>&1; then
  python3 -m pip install --quiet --upgrade redis ||
    python3 -m pip install --quiet --upgrade --break-system-packages redis
fi
