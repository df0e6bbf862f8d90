#!/usr/bin/env bash
# The job sandbox (bubblewrap, prlimit) and busybox-static for the hostile-job tests; fails when
# the sandbox cannot be made here. The same script the quick start runs.
set -euo pipefail
SANDBOX_STRICT=1 SANDBOX_TEST_TOOLS=1 bash "$(dirname "$0")/../../scripts/setup/sandbox.sh"
