#!/usr/bin/env bash
# SplitKV's whole test suite, on a fresh machine. Run as root: the last part
# installs podman and docker-compose with apt and runs the docker-compose
# deployment in containers (scripts/compose-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if cargo nextest --version >/dev/null 2>&1; then
  # Each test in a process of its own, with a time limit (.config/nextest.toml).
  cargo nextest run --workspace --release --no-fail-fast
  # nextest does not run doc tests.
  cargo test --workspace --release --doc
else
  cargo test --workspace --release
fi
scripts/compose-test.sh
scripts/readme-test.sh
