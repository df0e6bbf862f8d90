#!/usr/bin/env bash
# tmux: test/clients/cli.tty.test.ts runs the CLI on a real terminal (a private tmux server) and
# reads the screen with capture-pane. Idempotent.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if ! command -v tmux >/dev/null; then apt_install tmux; fi
tmux -V
