import { hashPassword, verifyPassword } from "../../services/auth/passwords";
import { parseAuthSettings } from "../../services/auth/settings";

describe("auth - passwords", () => {
  it("auth - default cost is OWASP's scrypt N=2^17, r=8, p=1", async () => {
    const { scryptLogN } = parseAuthSettings({}); // SCRYPT_LOG_N unset
    expect(scryptLogN).toBe(17);
    const hash = await hashPassword("correct horse", scryptLogN);
    expect(hash).toMatch(/^scrypt\$17\$8\$1\$/);
    expect(await verifyPassword("correct horse", hash)).toBe(true);
  });
  it("auth - wrong password, salts differ, and foreign formats are refused", async () => {
    const a = await hashPassword("password-1", 12);
    const b = await hashPassword("password-1", 12);
    expect(a).not.toBe(b);
    expect(await verifyPassword("password-2", a)).toBe(false);
    expect(await verifyPassword("password-1", "bcrypt$whatever")).toBe(false);
    expect(a).not.toContain("password-1");
  });
});
