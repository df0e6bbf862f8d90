#!/usr/bin/env bash
# `npm test`: the jest suite against the real servers, with the static checks (scripts/checks.sh:
# typecheck, eslint, prettier: single-threaded tools) in a second process beside it, filling the
# time jest's workers spend waiting on servers and processes. The
# checks' output follows jest's; the exit status is 1 when either failed. (The compose tests stay in
# the main run: beside it, their thirteen containers loaded both cores and slowed every other file.)
#   npm test -- FILE...   only those test files, with the checks beside them
#   TEST_WORKERS=N        jest's worker count (default 2; 1 runs in one process, --runInBand). Two
#                         workers took the suite from about 25 min to 13 on the 2-core CI machine: most
#                         files wait on servers and processes, and every file has its own databases,
#                         ports and folders, so two run side by side without meeting.
set -u
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
workers_wanted=${TEST_WORKERS:-2}
if [ "$workers_wanted" = 1 ]; then workers=(--runInBand); else workers=(--maxWorkers="$workers_wanted"); fi

bash scripts/checks.sh >"$logs/checks.log" 2>&1 &
checks=$!
npx jest "${workers[@]}" --forceExit "$@"
status=$?
wait "$checks" || status=1
echo
cat "$logs/checks.log"
exit $status
