#!/usr/bin/env bash
# Proves the README's first command on a truly fresh Debian 12: debootstraps one (minbase) into
# DIR, adds only Node.js (this machine's binary and npm) and git, copies the working tree in, and
# runs scripts/quickstart.sh there as root, inside a private network namespace (its PostgreSQL
# servers cannot clash with this machine's) and a private mount namespace rooted at DIR (pivot_root,
# so the job sandbox can make user namespaces, which a plain chroot forbids). Then it registers an
# account, runs a GPU job (it must run sandboxed as nobody, without the platform's environment)
# and provisions a database (its connection string must work; a wrong password must not).
# Needs root, debootstrap and iproute2. Takes a few minutes. Not part of `npm test`.
#   scripts/check-fresh-debian.sh [DIR]     (default /var/tmp/ci-platform-fresh)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${1:-/var/tmp/ci-platform-fresh}"
NS=ci-platform-fresh

[ -x "$DIR/usr/bin/apt-get" ] || debootstrap --variant=minbase bookworm "$DIR" http://deb.debian.org/debian >/dev/null
cp "$(command -v node)" "$DIR/usr/local/bin/node"
rm -rf "$DIR/usr/local/lib/node_modules" && cp -r "$(npm root -g)" "$DIR/usr/local/lib/node_modules"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$DIR/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$DIR/usr/local/bin/npx"
cp /etc/resolv.conf "$DIR/etc/"
cp /etc/ssl/certs/ca-certificates.crt "$DIR/root/host-ca.crt" # this machine's registry CA, if any
mount --bind /proc "$DIR/proc"; mount --bind /dev "$DIR/dev"
trap 'umount "$DIR/dev" "$DIR/proc" 2>/dev/null || true' EXIT
mkdir -p "$DIR/root/ci-platform"
(cd "$ROOT" && git ls-files -co --exclude-standard | grep -v '^node_modules' | tar -cf - -T -) | tar -C "$DIR/root/ci-platform" -xf -
# With this machine's network: git, the Debian packages the quick start will install (downloaded
# only), and the npm packages; the quick start itself then runs offline.
chroot "$DIR" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --download-only --no-install-recommends postgresql bubblewrap >/dev/null
  cd /root/ci-platform && npm ci --no-audit --no-fund --cafile /root/host-ca.crt >/dev/null 2>&1'
umount "$DIR/dev" "$DIR/proc"

cat >"$DIR/root/check.mjs" <<'JS'
const base = "http://127.0.0.1:3000";
const call = async (p, o = {}) => {
  const r = await fetch(base + p, { ...o, headers: { "content-type": "application/json", ...(o.headers || {}) } });
  return [r.status, await r.json().catch(() => null)];
};
const fail = (m) => { console.error("FAIL:", m); process.exit(1); };
const [, reg] = await call("/api/auth/register", { method: "POST", body: JSON.stringify({ email: `a${Date.now()}@example.com`, name: "A", password: "a long password" }) });
const auth = { authorization: `Bearer ${reg.accessToken}` };
const command = "id -u; echo CUDA=$CUDA_VISIBLE_DEVICES; tr '\\0' ' ' < /proc/1/environ; echo; cat /root/ci-platform/.env.local";
const [s, job] = await call("/api/gpu/jobs", { method: "POST", headers: auth, body: JSON.stringify({ command }) });
if (s !== 201) fail(`job ${s}`);
let detail;
for (let i = 0; i < 120 && !["completed", "failed"].includes(detail?.status); i++) {
  await new Promise((r) => setTimeout(r, 500));
  [, detail] = await call(`/api/gpu/jobs/${job.id}`, { headers: auth });
}
const out = detail?.result?.output ?? "";
console.log(out);
if (!out.startsWith("65534\n") || !/CUDA=GPU-/.test(out) || /JWT_SECRET|PASSWORD|DATABASE_URL/.test(out)) fail("job not sandboxed");
const [d, db] = await call("/api/databases", { method: "POST", headers: auth });
if (d !== 201) fail(`database ${d}`);
console.log(db.connectionString);
JS

ip netns add "$NS" 2>/dev/null || true
trap 'ip netns pids "$NS" | xargs -r kill -9; ip netns del "$NS" 2>/dev/null || true' EXIT
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" unshare --mount --pid --fork bash -s "$DIR" <<'INNER'
set -euo pipefail
DIR="$1"
mount --make-rprivate /
mount --bind "$DIR" "$DIR"; mkdir -p "$DIR/oldroot"; cd "$DIR"; pivot_root . oldroot
mount -t proc proc /proc; mount -t devtmpfs devtmpfs /dev 2>/dev/null || mount --rbind /oldroot/dev /dev
mkdir -p /dev/shm /dev/pts; mount -t tmpfs tmpfs /dev/shm
umount -l /oldroot
# A DIR from an earlier run starts over: no clusters, no secrets.
rm -rf /var/lib/postgresql /etc/postgresql /var/log/postgresql /var/run/postgresql/* /root/ci-platform/.env.local
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root
cd /root/ci-platform
(APT_UPDATED=1 timeout 600 bash scripts/quickstart.sh >/tmp/quickstart.log 2>&1 &)
for _ in $(seq 1 300); do node -e 'fetch("http://127.0.0.1:3001/ready").then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' && break; sleep 1; done
node /root/check.mjs >/tmp/check.out || { tail -40 /tmp/quickstart.log; exit 1; }
cat /tmp/check.out
cs="$(tail -1 /tmp/check.out)"
psql "$cs" -qAt -c "CREATE TABLE t (x int); INSERT INTO t VALUES (1); SELECT count(*) FROM t"
if psql "$(sed -E 's#:[A-Za-z0-9]+@#:wrong-password@#' <<<"$cs")" -c 'SELECT 1' >/dev/null 2>&1; then echo "FAIL: wrong password accepted"; exit 1; fi
echo "fresh Debian 12: quick start OK"
INNER
