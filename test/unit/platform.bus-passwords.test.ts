/**
 * Generated NATS passwords reach nats-server through environment variables, which it parses as
 * configuration values: each must read back as the same string. Checked with the real server
 * (`nats-server -t` tests a configuration without starting).
 */
import { spawnSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { newPassword } from "../../lib/bus-setup";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bus-passwords-"));
const conf = path.join(dir, "nats.conf");
fs.writeFileSync(conf, 'listen: "127.0.0.1:-1"\nauthorization { users = [ { user: "a", password: $PW } ] }\n');
const accepted = (pw: string) => spawnSync("/usr/sbin/nats-server", ["-c", conf, "-t"], { env: { PW: pw }, encoding: "utf8" }).status === 0;

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("platform - generated NATS passwords", () => {
  it.each<[string, string, boolean]>([
    ["digits only read as a number", "1234", false],
    ["a leading digit and an e read as a float", "0e7f3a", false],
    ["a leading letter reads as a string", "p0e7f3a", true],
  ])("platform - nats-server and %s", (_name, pw, ok) => {
    expect(accepted(pw)).toBe(ok);
  });

  it("platform - every generated password starts with a letter and nats-server takes it", () => {
    const passwords = Array.from({ length: 200 }, newPassword);
    for (const pw of passwords) expect(pw).toMatch(/^[a-z][0-9a-f]{48}$/);
    expect(new Set(passwords).size).toBe(200);
    for (const pw of passwords.slice(0, 5)) expect(accepted(pw)).toBe(true);
  });
});
