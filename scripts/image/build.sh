#!/usr/bin/env bash
# Builds the platform image from the registry-free base (scripts/image/base.sh) with the project's
# Dockerfile, NODE_IMAGE pointing at that base (README "Operations: the image without a registry").
#   IMAGE=ci-platform:0.1.0   the tag to build         BASE_IMAGE  see base.sh
#   IMAGE_DEPS=npm            `npm ci` inside the build (needs the npm registry from the build, --network host)
#   IMAGE_DEPS=prebuilt       no network at all: node_modules come from this checkout's installed tree
#                             (deploy/image/deps.ts: production-only, and the compiler for the build
#                             stage) and replace the Dockerfile's two `RUN npm ci` lines; everything
#                             else is built as the Dockerfile says. For machines whose builds cannot
#                             reach the registry (the test machines).
#   Extra arguments go to `docker build` (e.g. --label, --no-cache).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
IMAGE="${IMAGE:-ci-platform:0.1.0}"
BASE_IMAGE="${BASE_IMAGE:-ci-platform-base:bookworm-node20}"
export BASE_IMAGE
bash "$ROOT/scripts/image/base.sh"

if [ "${IMAGE_DEPS:-npm}" = npm ]; then
  exec docker build --network host --build-arg NODE_IMAGE="$BASE_IMAGE" -t "$IMAGE" "$@" "$ROOT"
fi
[ "$IMAGE_DEPS" = prebuilt ] || { echo "IMAGE_DEPS must be npm or prebuilt, got \"$IMAGE_DEPS\"" >&2; exit 1; }

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
# The build context: the checkout without what .dockerignore leaves out anyway (docker applies it again).
tar -C "$ROOT" --exclude=./node_modules --exclude=./.git --exclude=./dist --exclude=./test --exclude=./bench \
  --exclude=./scratch --exclude=./coverage --exclude=./test-results --exclude=./k8s -c . | tar -C "$ctx" -x
"$ROOT/node_modules/.bin/tsx" "$ROOT/deploy/image/deps.ts" "$ctx/.image-deps" >/dev/null
# .dockerignore leaves out every node_modules folder, nested ones in these trees too (moleculer's own glob).
printf '!.image-deps\n!.image-deps/**\n' >>"$ctx/.dockerignore"

# Exactly the two npm ci lines are replaced; a Dockerfile that no longer has them stops the build.
build_ci='RUN npm ci --no-audit --no-fund'
deps_ci='RUN npm ci --omit=dev --no-audit --no-fund \&\& npm cache clean --force'
for line in "$build_ci" "$deps_ci"; do
  n="$(grep -c "^${line}\$" "$ROOT/Dockerfile" || true)"
  [ "$n" = 1 ] || { echo "Dockerfile: expected one line '${line//\\/}', found $n" >&2; exit 1; }
done
sed -e "s|^${build_ci}\$|COPY .image-deps/build-modules ./node_modules|" \
  -e "s|^${deps_ci}\$|COPY .image-deps/prod-modules ./node_modules|" "$ROOT/Dockerfile" >"$ctx/Dockerfile.prebuilt"
# No network in this build: no PostgreSQL client tools from PostgreSQL's apt repository either (README).
docker build --network none --build-arg NODE_IMAGE="$BASE_IMAGE" --build-arg PG_CLIENT_MAJOR= -f "$ctx/Dockerfile.prebuilt" -t "$IMAGE" "$@" "$ctx"
