#!/usr/bin/env bash
# `npm test`: the jest suite against the real servers, with the static checks (scripts/checks.sh:
# typecheck, eslint, prettier: single-threaded tools) in a second process beside it: jest leaves
# about one of two cores idle while it waits on servers and processes, which the checks fill. The
# checks' output follows jest's; the exit status is 1 when either failed. (The compose tests stay in
# the main run: beside it, their thirteen containers loaded both cores and slowed every other file.)
#   npm test -- FILE...   only those test files, with the checks beside them
#   TEST_WORKERS=N        jest's worker count (default: one process, --runInBand)
set -u
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
if [ -n "${TEST_WORKERS:-}" ]; then workers=(--maxWorkers="$TEST_WORKERS"); else workers=(--runInBand); fi

bash scripts/checks.sh >"$logs/checks.log" 2>&1 &
checks=$!
npx jest "${workers[@]}" --forceExit "$@"
status=$?
wait "$checks" || status=1
echo
cat "$logs/checks.log"
exit $status
