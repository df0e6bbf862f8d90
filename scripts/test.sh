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

# Files that start a compose stack (a dozen containers, loading both cores) or build an image:
# beside another file they starved it (a point-in-time restore ran past its 180 s; a container of
# the Docker executor's test took over 30 s to exit), so a whole run gives them the machine after
# the others, one at a time.
alone=(test/e2e/ops.stack.test.ts test/e2e/ops.compose-pooler.test.ts test/e2e/ops.image.test.ts test/e2e/gpu.platform-access-clients.test.ts)

bash scripts/checks.sh >"$logs/checks.log" 2>&1 &
checks=$!
if [ $# -eq 0 ] && [ "$workers_wanted" != 1 ]; then
  npx jest "${workers[@]}" --forceExit --testPathIgnorePatterns '/node_modules/' "${alone[@]}"
  status=$?
  rm -f test-results/summary-alone.txt
  TEST_SUMMARY_FILE=summary-alone.txt npx jest --runInBand --forceExit "${alone[@]}" || status=1
  cat test-results/summary-alone.txt >>test-results/summary.txt 2>/dev/null
else
  npx jest "${workers[@]}" --forceExit "$@"
  status=$?
fi
wait "$checks" || status=1
echo
cat "$logs/checks.log"
exit $status
