#!/usr/bin/env bash
# Runs the commands of README.md, so that none of them rots:
#  - every ```sh block preceded by <!-- readme-test --> runs here, in order,
#    from the repository root, in one shell (servers started with & are
#    stopped at the end; certs/ and data/ made by the README are removed);
#  - every command of a block marked <!-- compose-test --> must appear in
#    scripts/compose-test.sh, which runs it against the real deployment;
#  - every command of a block marked <!-- ci --> (the test command) must
#    appear in .ci/run, which runs it.
# Installs what the commands use (redis-tools, fio). Exits non-zero when a
# command fails.
set -euo pipefail
cd "$(dirname "$0")/.."
need() { command -v "$1" >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need redis-cli redis-tools
need fio fio

for dir in certs data; do
  [ -e "$dir" ] && { echo "readme-test: ./$dir exists; move it away first" >&2; exit 1; }
done
cleanup() {
  local status=$?
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf certs data
  exit "$status"
}
trap cleanup EXIT

# Split README.md into tagged blocks: one file per block, named by tag.
work=$(mktemp -d)
python3 - "$work" <<'EOF'
import re, sys, pathlib
out = pathlib.Path(sys.argv[1])
text = pathlib.Path("README.md").read_text()
blocks = re.findall(r"<!-- ([a-z-]+) -->\s*```sh\n(.*?)```", text, re.S)
for i, (tag, body) in enumerate(blocks):
    (out / f"{i:02d}-{tag}.sh").write_text(body)
print(f"{len(blocks)} tagged blocks")
EOF

# Every line of each block tagged $1 must appear in the file $2.
lines_appear_in() {
  local block line
  for block in "$work"/*-"$1".sh; do
    while IFS= read -r line; do
      [ -z "$line" ] && continue
      grep -qF -- "$line" "$2" ||
        { echo "readme-test: '$line' is not run by $2" >&2; exit 1; }
    done <"$block"
  done
}
lines_appear_in compose-test scripts/compose-test.sh
lines_appear_in ci .ci/run

for block in "$work"/*-readme-test.sh; do
  echo "== README: $(head -1 "$block")"
  # shellcheck source=/dev/null
  source "$block"
  if grep -q '&$' "$block"; then
    # A server was started: give it time to come up (the compute node waits
    # for the storage node by itself).
    for _ in $(seq 60); do
      if grep -q compute-node "$block"; then redis-cli -p 6379 ping >/dev/null 2>&1 && break; else sleep 1; break; fi
      sleep 0.5
    done
  fi
done
echo "readme-test: every README command ran"
