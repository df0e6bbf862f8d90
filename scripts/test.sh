#!/usr/bin/env bash
# `npm test`: the jest suite against the real servers, with the static checks (scripts/checks.sh:
# typecheck, eslint, prettier) and then the compose tests (test/e2e/ops.stack.test.ts, which builds
# the image and runs the stack in Docker: the suite's longest file by far, and the pooler's) in a
# second process beside it. jest leaves about one of two cores idle while it waits on servers and processes; the
# second process fills it. Each one's output is printed whole; the exit status is 1 when any failed.
#   npm test -- FILE...   only those test files, with the checks beside them
#   TEST_WORKERS=N        jest's worker count for the main run (default: one process, --runInBand)
set -u
cd "$(dirname "$0")/.."
BESIDE=(test/e2e/ops.stack.test.ts test/e2e/ops.compose-pooler.test.ts)
BESIDE_PATTERN="/node_modules/|ops\\.stack\\.test\\.ts$|ops\\.compose-pooler\\.test\\.ts$"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rm -f test-results/summary-beside.txt
if [ -n "${TEST_WORKERS:-}" ]; then workers=(--maxWorkers="$TEST_WORKERS"); else workers=(--runInBand); fi

(
  bash scripts/checks.sh >"$logs/checks.log" 2>&1
  echo $? >"$logs/checks.rc"
  if [ $# -eq 0 ]; then
    TEST_SUMMARY_FILE=summary-beside.txt npx jest --runInBand --forceExit "${BESIDE[@]}" >"$logs/beside.log" 2>&1
    echo $? >"$logs/beside.rc"
  fi
) &
second=$!

if [ $# -eq 0 ]; then
  npx jest "${workers[@]}" --forceExit --testPathIgnorePatterns="$BESIDE_PATTERN"
else
  npx jest "${workers[@]}" --forceExit "$@"
fi
status=$?
wait "$second"

echo
cat "$logs/checks.log"
[ "$(cat "$logs/checks.rc")" = 0 ] || status=1
if [ -f "$logs/beside.rc" ]; then
  echo "== beside it: ${BESIDE[*]}"
  cat "$logs/beside.log"
  [ "$(cat "$logs/beside.rc")" = 0 ] || status=1
  # .ci/run prints test-results/summary.txt: the second process's lines go below the first's.
  [ -f test-results/summary-beside.txt ] && { echo "beside it:"; cat test-results/summary-beside.txt; } >>test-results/summary.txt
fi
exit $status
