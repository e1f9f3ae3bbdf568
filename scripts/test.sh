#!/usr/bin/env bash
# Runs SplitKV's whole test suite on a fresh machine. Everything the tests
# need comes from crates, so cargo is the only requirement.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --release
