/**
 * Look-alike e-mails, replayed through the gateway against the real auth service and PostgreSQL:
 * a trailing dot, fullwidth letters, a decomposed accent or an ideographic full stop name the
 * account that already exists (409 on register, that account on login); invisible and control
 * characters are 400 VALIDATION_FAILED naming `email`, with nothing stored. Accounts registered
 * before the normalisation keep working through migration 3, and a look-alike never becomes admin.
 */
import { randomUUID } from "crypto";
import { Client } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { migrations } from "../../services/auth/migrations";
import { hashPassword } from "../../services/auth/passwords";
import { ADMIN_PG_URL, dropDatabase, http, startTestPlatform, TestPlatform, testDatabaseUrl, uniqueName, waitForRoute } from "../support/platform";

const PASSWORD = "correct horse battery";
const LIMITS = { AUTH_RATE_LIMIT_PER_IP: "10000", AUTH_RATE_LIMIT_PER_EMAIL: "10000" };
/** ASCII letters and digits as their fullwidth forms (U+FF01…), which NFKC maps back. */
const fullwidth = (text: string) => text.replace(/[A-Za-z0-9]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0));

async function startOn(databaseUrl: string | undefined, env: Record<string, string> = {}): Promise<TestPlatform> {
  const platform = await startTestPlatform({ services: ["api-gateway", "auth"], databaseUrl, env: { ...LIMITS, ...env } });
  await waitForRoute(platform.baseUrl, "POST", "/api/auth/register");
  return platform;
}

describe("accounts lookalike - one account per normalised e-mail", () => {
  let platform: TestPlatform;
  let db: Client;
  const local = uniqueName("victim");
  const victim = `${local}@example.com`;
  const accented = `\u00e1lvaro-${local}@example.com`; // á, composed
  const subdomain = `${local}@mail.example.com`;
  const register = (email: string) => http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, name: "Look", password: PASSWORD } });
  const login = (email: string, password = PASSWORD) => http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password } });
  const accounts = async () => (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM auth.clients")).rows[0].n;

  beforeAll(async () => {
    platform = await startOn(undefined);
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
    expect((await register(victim)).status).toBe(201);
    for (const email of [accented, subdomain]) expect((await register(email)).status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
  });

  const lookalikes: Array<[string, string, string]> = [
    ["a trailing dot on the domain", `${victim}.`, victim],
    ["fullwidth letters", `${fullwidth(local)}@example.com`, victim],
    ["fullwidth capitals and a trailing dot", `${fullwidth(local.toUpperCase())}@EXAMPLE.COM.`, victim],
    ["an ideographic full stop", `${local}@mail\u3002example.com`, subdomain],
    ["white space around it", `  ${victim.toUpperCase()}\t`, victim],
    ["a decomposed accent (a + U+0301)", `a\u0301lvaro-${local}@example.com`, accented],
  ];

  test.each(lookalikes)("accounts lookalike - %s registers as 409 EMAIL_TAKEN and logs in to the same account", async (_, email, original) => {
    const before = await accounts();
    const res = await register(email);
    expect([res.status, res.body?.error?.code]).toEqual([409, "EMAIL_TAKEN"]);
    expect(await accounts()).toBe(before);
    const [theirs, ours] = await Promise.all([login(original), login(email)]);
    expect([ours.status, ours.body?.client?.id]).toEqual([200, theirs.body.client.id]);
  });

  test("accounts lookalike - `á` and `a` stay different addresses, and a new account is stored in its normalised form", async () => {
    const plain = await register(`alvaro-${local}@example.com`);
    expect(plain.status).toBe(201);
    const wide = await register(`${fullwidth("Wide")}-${local}@Example.Com.`);
    expect([wide.status, wide.body.client.email]).toEqual([201, `wide-${local}@example.com`]);
  });

  const invisible: Array<[string, string]> = [
    ["a zero-width space", "\u200b"],
    ["a zero-width non-joiner", "\u200c"],
    ["a zero-width joiner", "\u200d"],
    ["a word joiner", "\u2060"],
    ["a byte order mark", "\ufeff"],
    ["a right-to-left override", "\u202e"],
    ["a left-to-right isolate", "\u2066"],
    ["a right-to-left mark", "\u200f"],
    ["a soft hyphen", "\u00ad"],
    ["a Hangul filler", "\u3164"],
    ["a Braille pattern blank (a symbol, not a default-ignorable)", "\u2800"],
    ["a musical null notehead (a symbol that draws nothing)", "\u{1D159}"],
    ["a bell (C0 control)", "\u0007"],
    ["a delete", "\u007f"],
    ["a next line (C1 control)", "\u0085"],
    ["an escape", "\u001b"],
  ];

  test.each(invisible)("accounts lookalike - %s in the e-mail is 400 VALIDATION_FAILED naming email, on register and login", async (_, char) => {
    const before = await accounts();
    // Inside the address: at its ends, white space (U+FEFF is white space to JavaScript) is trimmed.
    for (const email of [
      `${local.slice(0, 3)}${char}${local.slice(3)}@example.com`,
      `${uniqueName("fresh")}${char}@example.com`,
      `${local}@exa${char}mple.com`,
    ]) {
      for (const res of [await register(email), await login(email)]) {
        expect([JSON.stringify(email), res.status, res.body?.error?.code]).toEqual([JSON.stringify(email), 400, "VALIDATION_FAILED"]);
        expect(res.body.error.details).toEqual([expect.objectContaining({ field: "email" })]);
      }
    }
    expect(await accounts()).toBe(before);
  });
});

describe("accounts lookalike - accounts registered before the normalisation (migration 3)", () => {
  let platform: TestPlatform;
  let db: Client;
  const tag = uniqueName("m");
  const at = (local: string) => `${local}-${tag}@example.com`;
  // Created by the old code, oldest first: look-alikes that were separate accounts.
  const legacy = {
    dotFirst: { email: `${at("m")}.`, age: 5 },
    canonical: { email: at("m"), age: 4 },
    wideOld: { email: fullwidth(at("n")), age: 3 },
    dotNew: { email: `${at("n")}.`, age: 2 },
    boss: { email: at("boss"), age: 1 },
    bossLookalike: { email: `${at("boss")}.`, age: 0 },
  };
  const ids: Record<string, string> = {};
  const passwordOf = (name: string) => `password-of-${name}`;
  const login = (email: string, password: string) => http(platform.baseUrl, "POST", "/api/auth/login", { body: { email, password } });

  beforeAll(async () => {
    const databaseUrl = testDatabaseUrl();
    await ensureDatabase(databaseUrl);
    const pool = newPool({ connectionString: databaseUrl });
    try {
      await migrate(pool, "auth", migrations.slice(0, 2));
      for (const [name, { email, age }] of Object.entries(legacy)) {
        ids[name] = randomUUID();
        await pool.query(`INSERT INTO auth.clients (id, email, name, password_hash, created_at) VALUES ($1, $2, $3, $4, now() - make_interval(days => $5))`, [
          ids[name],
          email,
          name,
          await hashPassword(passwordOf(name), 14),
          age,
        ]);
      }
    } finally {
      await pool.end();
    }
    platform = await startOn(databaseUrl, { ADMIN_EMAILS: at("boss") });
    db = new Client({ connectionString: databaseUrl });
    await db.connect();
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
  });

  test("accounts lookalike - the account already in normalised form, else the oldest, keeps the e-mail; the others keep their exact one", async () => {
    const { rows } = await db.query<{ id: string; email_normalized: string | null }>("SELECT id, email_normalized FROM auth.clients");
    const form = Object.fromEntries(rows.map((r) => [r.id, r.email_normalized]));
    expect(Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, form[id]]))).toEqual({
      dotFirst: null,
      canonical: at("m"),
      wideOld: at("n"),
      dotNew: null,
      boss: at("boss"),
      bossLookalike: null,
    });
  });

  test("accounts lookalike - each legacy account logs in by its exact e-mail; the normalised form reaches the keeper; new look-alikes are 409", async () => {
    for (const name of Object.keys(legacy) as Array<keyof typeof legacy>) {
      const res = await login(legacy[name].email, passwordOf(name));
      expect([name, res.status, res.body?.client?.id]).toEqual([name, 200, ids[name]]);
    }
    expect((await login(`  ${at("N").toUpperCase()} `, passwordOf("wideOld"))).body?.client?.id).toBe(ids.wideOld);
    const again = await http(platform.baseUrl, "POST", "/api/auth/register", { body: { email: fullwidth(at("m")), name: "x", password: PASSWORD } });
    expect([again.status, again.body?.error?.code]).toEqual([409, "EMAIL_TAKEN"]);
  });

  test("accounts lookalike - a look-alike of an ADMIN_EMAILS address never gets admin", async () => {
    const boss = await login(legacy.boss.email, passwordOf("boss"));
    expect(boss.body?.client?.role).toBe("admin");
    const lookalike = await login(legacy.bossLookalike.email, passwordOf("bossLookalike"));
    expect([lookalike.status, lookalike.body?.client?.role]).toEqual([200, "client"]);
  });
});

describe("accounts lookalike - migration 3 on a database that is not UTF8", () => {
  test("accounts lookalike - on SQL_ASCII (initdb's default under the C locale) migration 3 applies: the trimmed, lower-cased form keys the older rows", async () => {
    const databaseUrl = testDatabaseUrl();
    const admin = new Client({ connectionString: ADMIN_PG_URL });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${new URL(databaseUrl).pathname.slice(1)}" ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
    } finally {
      await admin.end();
    }
    const pool = newPool({ connectionString: databaseUrl });
    try {
      await migrate(pool, "auth", migrations.slice(0, 2));
      const rows = { older: [randomUUID(), " Ann@Example.com. ", 2], newer: [randomUUID(), "ann@example.com", 1] } as const;
      for (const [id, email, age] of Object.values(rows))
        await pool.query(`INSERT INTO auth.clients (id, email, name, password_hash, created_at) VALUES ($1, $2, 'x', 'x', now() - make_interval(days => $3))`, [
          id,
          email,
          age,
        ]);
      expect(await migrate(pool, "auth", migrations.slice(0, 3))).toEqual([3]);
      const { rows: keyed } = await pool.query<{ id: string; email_normalized: string | null }>("SELECT id, email_normalized FROM auth.clients");
      const form = Object.fromEntries(keyed.map((r) => [r.id, r.email_normalized]));
      // the row already in the normalised form keeps it, as on a UTF8 database
      expect([form[rows.newer[0]], form[rows.older[0]]]).toEqual(["ann@example.com", null]);
    } finally {
      await pool.end();
      await dropDatabase(databaseUrl);
    }
  });
});
