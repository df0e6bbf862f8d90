#!/usr/bin/env bash
# Both Compose implementations the compose stack supports (docs/operations.md "Deploy with Docker
# Compose"): Debian 12's docker-compose (1.29) from apt, and Compose v2 as the Docker CLI plugin
# (`docker compose`), which bookworm does not ship. v2 comes from Debian 13's docker-compose package
# (statically built Go; needs only libc6 >= 2.34) without adding trixie to the apt sources: trixie's
# InRelease is checked with gpgv against debian-archive-keyring, Packages.xz against the SHA256 in
# it, the .deb against the SHA256 in Packages.xz; then only its plugin binary is installed.
# test/unit/ops.compose.test.ts validates docker-compose.yml with both, offline;
# test/e2e/ops.compose-pooler.test.ts starts its pooler with v2. Idempotent; a second run only prints
# the versions.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if ! command -v docker-compose >/dev/null; then apt_install docker-compose; fi
docker-compose version --short

MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=trixie
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
ARCH="$(dpkg --print-architecture)"

if ! docker compose version >/dev/null 2>&1; then
  for tool in curl gpgv xz dpkg-deb sha256sum; do command -v "$tool" >/dev/null || missing=1; done
  if [ -n "${missing:-}" ]; then apt_install curl ca-certificates gpgv xz-utils dpkg; fi
  # bookworm's keyring (2023.3+deb12u1 and later) holds trixie's archive and release keys.
  [ -s "$KEYRING" ] || apt_install debian-archive-keyring
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  fetch() { curl -fsS --retry 3 --max-time 300 -o "$2" "$MIRROR/$1"; }
  # sha256 FILE EXPECTED: fails unless FILE hashes to EXPECTED.
  sha256() { echo "$2  $1" | sha256sum -c --quiet - || { echo "SHA256 mismatch: $1" >&2; exit 1; }; }

  fetch "dists/$SUITE/InRelease" "$work/InRelease"
  # Only what the signature covers is read further.
  gpgv --quiet --keyring "$KEYRING" --output "$work/Release" "$work/InRelease" 2>/dev/null ||
    { echo "trixie's InRelease: no good signature from $KEYRING (upgrade debian-archive-keyring)" >&2; exit 1; }
  index_sha="$(awk -v want="main/binary-$ARCH/Packages.xz" '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && $3 == want { print $1 }' "$work/Release")"
  [ -n "$index_sha" ] || { echo "trixie's Release lists no main/binary-$ARCH/Packages.xz" >&2; exit 1; }
  fetch "dists/$SUITE/main/binary-$ARCH/Packages.xz" "$work/Packages.xz"
  sha256 "$work/Packages.xz" "$index_sha"

  # The docker-compose stanza: its pool path and SHA256 (whatever trixie's current version is).
  xz -dc "$work/Packages.xz" | awk -v RS= -v FS='\n' '$1 == "Package: docker-compose"' >"$work/stanza"
  version="$(sed -n 's/^Version: //p' "$work/stanza")"
  file="$(sed -n 's/^Filename: //p' "$work/stanza")"
  deb_sha="$(sed -n 's/^SHA256: //p' "$work/stanza")"
  [[ "$version" == 2.* && "$file" =~ ^pool/main/d/docker-compose/docker-compose_[A-Za-z0-9.+~-]+_${ARCH}\.deb$ && "$deb_sha" =~ ^[0-9a-f]{64}$ ]] ||
    { echo "trixie's docker-compose entry is not a Compose v2 package:" >&2; cat "$work/stanza" >&2; exit 1; }
  fetch "$file" "$work/compose.deb"
  sha256 "$work/compose.deb" "$deb_sha"

  dpkg-deb -x "$work/compose.deb" "$work/root"
  plugin="$work/root/usr/libexec/docker/cli-plugins/docker-compose"
  [ -x "$plugin" ] || { echo "no usr/libexec/docker/cli-plugins/docker-compose in $file" >&2; exit 1; }
  install -d "$PLUGIN_DIR"
  # Into place in one step: a concurrent `docker compose` never sees half a binary.
  install -m 0755 "$plugin" "$PLUGIN_DIR/.docker-compose.new"
  mv -f "$PLUGIN_DIR/.docker-compose.new" "$PLUGIN_DIR/docker-compose"
  echo "Compose v2 from trixie's docker-compose $version (SHA256 $deb_sha) in $PLUGIN_DIR"
fi
docker compose version
