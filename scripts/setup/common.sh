#!/usr/bin/env bash
# Helpers shared by the quick start (scripts/quickstart.sh) and CI (.ci/run, .ci/setup.d/):
# install what is missing from Debian's packages, and probe whether a TCP server answers.
# Source it; it defines functions only.

APT_UPDATED="${APT_UPDATED:-}"

# log STEP: a heading, with the seconds since the calling shell started (where a slow setup went).
log() { printf '\n== %s (at %ss)\n' "$*" "$SECONDS"; }

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# apt_install PKG…: installs the packages that are not installed yet (apt-get update once).
apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "Missing Debian packages: ${missing[*]}; run this as root (sudo) to install them" >&2
    return 1
  fi
  if [ -z "$APT_UPDATED" ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# newest installed PostgreSQL major version (after the package is installed)
pg_version() {
  local ver
  ver="$(ls /etc/postgresql 2>/dev/null | sort -n | tail -1)"
  [ -n "$ver" ] || ver="$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)"
  printf '%s' "$ver"
}

# wait_answer HOST PORT SECONDS
wait_answer() {
  local i
  for i in $(seq 1 $(($3 * 5))); do answers "$1" "$2" && return 0; sleep 0.2; done
  return 1
}

# random_secret: 32 URL-safe characters (letters and digits)
random_secret() { head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32; }
