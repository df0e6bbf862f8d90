/** dbaas identifiers, passwords and SCRAM verifiers: pure, no server. */
import { createHash, createHmac } from "crypto";
import { generatePassword, PASSWORD_PATTERN, scramVerifier, VERIFIER_PATTERN } from "../../services/dbaas/credentials";
import { isUuid } from "../../lib/uuid";
import { checkIdentifier, clientPrefix, generateNames, holdRoleOf, ident, kindOf, PATTERNS } from "../../services/dbaas/naming";

describe("dbaas naming", () => {
  it.each([
    ["a UUID keeps its first 8 hex", "f3921d0e-ac9b-454a-a18a-710bd7250135", "f3921d0e"],
    ["upper case is lowered", "F3921D0E-AC9B-454A-A18A-710BD7250135", "f3921d0e"],
    ["dashes and symbols are dropped", 'ab-cd_ef"; DROP ROLE x;--12', "abcdefdr"],
    ["a short id is padded", "ab", "ab000000"],
  ])("dbaas naming - client prefix: %s", (_name, clientId, prefix) => {
    expect(clientPrefix(clientId)).toBe(prefix);
  });

  it("dbaas naming - generated names follow the spec's forms and share the role hex", () => {
    const hex = ["a1b2c3d4e5f6", "0badcafe"];
    const names = generateNames("f3921d0e-ac9b-454a-a18a-710bd7250135", () => hex.shift()!);
    expect(names).toEqual({ databaseName: "client_f3921d0e_0badcafe", username: "user_a1b2c3d4e5f6", holdRole: "hold_a1b2c3d4e5f6" });
    const random = generateNames("f3921d0e-ac9b-454a-a18a-710bd7250135");
    expect(random.databaseName).toMatch(/^client_f3921d0e_[0-9a-f]{8}$/);
    expect(random.username).toMatch(/^user_[0-9a-f]{12}$/);
  });

  it.each([
    ["quote breaks out", "database", 'client_abcdefgh_1234567"; DROP DATABASE x; --'],
    ["upper case", "user", "user_A1B2C3D4E5F6"],
    ["too short", "user", "user_a1b2"],
    ["other prefix", "database", "postgres"],
    ["template", "database", "template1"],
    ["superuser", "user", "postgres"],
    ["empty", "hold", ""],
  ] as const)("dbaas naming - refuses a %s identifier", (_name, kind, value) => {
    expect(() => checkIdentifier(kind, value)).toThrow(/pattern/);
    expect(() => ident(kind, value)).toThrow(/pattern/);
  });

  it("dbaas naming - quotes identifiers that pass and knows their kind", () => {
    expect(ident("database", "client_abcdefgh_01234567")).toBe('"client_abcdefgh_01234567"');
    expect(kindOf("user_0123456789ab")).toBe("user");
    expect(kindOf("hold_0123456789ab")).toBe("hold");
    expect(kindOf("postgres")).toBeUndefined();
    expect(holdRoleOf("user_0123456789ab")).toBe("hold_0123456789ab");
    expect(() => holdRoleOf("postgres")).toThrow();
    expect(Object.keys(PATTERNS).sort()).toEqual(["database", "hold", "job", "user"]);
  });

  it.each([
    ["a UUID", "39bd8187-ef2c-43bf-9e11-3c74b8bf4fd7", true],
    ["upper case UUID", "39BD8187-EF2C-43BF-9E11-3C74B8BF4FD7", true],
    ["a number", "42", false],
    ["SQL", "' OR 1=1 --", false],
    ["a UUID with extra", "39bd8187-ef2c-43bf-9e11-3c74b8bf4fd7x", false],
  ])("dbaas naming - isUuid: %s", (_name, value, expected) => {
    expect(isUuid(value)).toBe(expected);
  });
});

describe("dbaas credentials", () => {
  it("dbaas credentials - passwords are 32 letters and digits and differ", () => {
    const passwords = new Set(Array.from({ length: 50 }, () => generatePassword()));
    expect(passwords.size).toBe(50);
    for (const p of passwords) expect(p).toMatch(PASSWORD_PATTERN);
  });

  it("dbaas credentials - bytes that would bias the alphabet are drawn again", () => {
    // 248..255 are rejected (62 * 4 = 248); 0 → "A", 61 → "9", 62 → "A" again.
    const draws = [Buffer.from([255, 248, 0, 61, 62, ...Array(27).fill(1)]), Buffer.from(Array(32).fill(2))];
    const password = generatePassword(() => draws.shift() ?? Buffer.alloc(32));
    expect(password).toBe("A9A" + "B".repeat(27) + "CC");
  });

  it("dbaas credentials - the verifier matches RFC 7677's exchange for user/pencil", async () => {
    const verifier = await scramVerifier("pencil", Buffer.from("W22ZaJ0SNY7soEsUEjb6gQ==", "base64"), 4096);
    expect(verifier).toMatch(VERIFIER_PATTERN);
    const [, salt, storedKey, serverKey] = /^SCRAM-SHA-256\$4096:([^$]+)\$([^:]+):(.+)$/.exec(verifier)!;
    expect(salt).toBe("W22ZaJ0SNY7soEsUEjb6gQ==");
    const nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const authMessage = `n=user,r=rOprNGfwEbeRWgbNEkqO,r=${nonce},s=${salt},i=4096,c=biws,r=${nonce}`;
    // The server's signature from the RFC proves ServerKey; the client's proof, un-XORed, proves StoredKey.
    expect(createHmac("sha256", Buffer.from(serverKey, "base64")).update(authMessage).digest("base64")).toBe("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    const proof = Buffer.from("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "base64");
    const signature = createHmac("sha256", Buffer.from(storedKey, "base64")).update(authMessage).digest();
    const clientKey = Buffer.from(proof.map((byte, i) => byte ^ signature[i]));
    expect(createHash("sha256").update(clientKey).digest("base64")).toBe(storedKey);
  });

  it("dbaas credentials - a fresh salt each time, and no plaintext in the verifier", async () => {
    const password = generatePassword();
    const [a, b] = await Promise.all([scramVerifier(password), scramVerifier(password)]);
    expect(a).not.toBe(b);
    expect(a).not.toContain(password);
    await expect(scramVerifier("it's")).resolves.toMatch(VERIFIER_PATTERN);
    await expect(scramVerifier("naïve")).rejects.toThrow(/ASCII/);
  });
});
