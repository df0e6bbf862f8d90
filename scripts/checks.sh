#!/usr/bin/env bash
# `npm run checks` (the first part of `npm test`): typecheck, eslint and the prettier check at the
# same time. Each is one single-threaded process, so on a machine with two or more cores the three
# take about as long as eslint alone. The output of each is printed whole once all have ended; the
# exit status is 1 when any of them failed.
set -u
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
checks=(typecheck lint format:check)
pids=()
for check in "${checks[@]}"; do
  npm run --silent "$check" >"$logs/$check.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!checks[@]}"; do
  if wait "${pids[$i]}"; then
    echo "${checks[$i]}: passed"
  else
    status=1
    echo "${checks[$i]}: FAILED"
    cat "$logs/${checks[$i]}.log"
  fi
done
exit $status
