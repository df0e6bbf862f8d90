#!/usr/bin/env bash
# Runs one bench script on an earlier commit and on this checkout, alternating ROUNDS times, so
# load from anything else on the machine falls on both alike. Output: bench/results/compare-*.log.
#   bench/compare.sh REV SCRIPT [ROUNDS]      e.g. bench/compare.sh f9a31f5 bench:scheduler 2
set -euo pipefail
rev="$1"; script="$2"; rounds="${3:-2}"
here="$(cd "$(dirname "$0")/.." && pwd)"
base="$(mktemp -d)/base"
git -C "$here" worktree add -q --detach "$base" "$rev"
trap 'git -C "$here" worktree remove --force "$base"' EXIT
ln -s "$here/node_modules" "$base/node_modules"   # a superset of the earlier commit's packages
mkdir -p "$here/bench/results"
stamp="$(date +%Y%m%d-%H%M%S)"
for i in $(seq 1 "$rounds"); do
  for side in base head; do
    dir="$here"; [ "$side" = base ] && dir="$base"
    log="$here/bench/results/compare-$stamp-$script-$side-$i.log"
    echo "== round $i: $side ($(git -C "$dir" rev-parse --short HEAD)) → $log"
    (cd "$dir" && npm run --silent "$script") > "$log" 2>&1 || { echo "failed, see $log"; exit 1; }
  done
done
