#!/usr/bin/env bash
# Runs the commands of README.md, so that none of them rots:
#  - every ```sh block preceded by <!-- readme-test --> runs here, in order,
#    from the repository root, in one shell (servers started with & are
#    stopped at the end; certs/ and data/ made by the README are removed);
#  - every command of a block marked <!-- compose-test --> must appear in
#    scripts/compose-test.sh, which runs it against the real deployment;
#  - every command of a block marked <!-- ci --> (the test command) must
#    appear in .ci/run, which runs it.
# Installs what the commands use (redis-tools, fio) and what it uses itself
# (python3). Exits non-zero when a command fails or a server it starts never
# answers.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
need redis-cli redis-tools fio fio python3 python3

for dir in certs data; do
  [ -e "$dir" ] && { echo "readme-test: ./$dir exists; move it away first" >&2; exit 1; }
done
work=""
cleanup() {
  local status=$?
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf certs data
  if [ -n "$work" ]; then rm -rf "$work"; fi
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
    # A server was started in the background: wait until it answers.
    if grep -q 'compute-node serve' "$block"; then
      port=$(grep -o -- '--listen [^ ]*:[0-9]*' "$block" | grep -o '[0-9]*$' || echo 6379)
      wait_for "the compute node (redis-cli -p $port ping)" 30 redis-cli -p "$port" ping
    elif grep -q 'storage-node serve' "$block"; then
      wait_for "the storage node (storage-node probe --addr localhost:7000)" 30 \
        target/release/storage-node probe --addr localhost:7000 --ca certs/storage/ca.pem
    else
      echo "readme-test: no way to tell when the server of this block answers: $(head -1 "$block")" >&2
      exit 1
    fi
  fi
done
echo "readme-test: every README command ran"
