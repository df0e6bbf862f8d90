#!/usr/bin/env bash
# `npm test`: the static checks (scripts/checks.sh: typecheck, eslint, prettier) run beside the jest
# suite instead of before it: jest against the real servers leaves about one of two cores idle
# (it waits on servers and processes), which the checks fill. Each one's output is printed whole;
# the exit status is 1 when either failed. Arguments go to jest (e.g. a test file).
#   TEST_WORKERS=N   jest's worker count (default: one process, --runInBand)
set -u
cd "$(dirname "$0")/.."
checks_log=$(mktemp)
trap 'rm -f "$checks_log"' EXIT
bash scripts/checks.sh >"$checks_log" 2>&1 &
checks=$!
if [ -n "${TEST_WORKERS:-}" ]; then workers=(--maxWorkers="$TEST_WORKERS"); else workers=(--runInBand); fi
npx jest "${workers[@]}" --forceExit "$@"
jest_status=$?
wait "$checks"
checks_status=$?
cat "$checks_log"
[ "$jest_status" = 0 ] && [ "$checks_status" = 0 ]
