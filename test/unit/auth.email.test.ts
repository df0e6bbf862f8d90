/** The e-mail's normalised form and what is refused, as a table; ADMIN_EMAILS goes through the same rule. */
import { emailProblem, normalizeEmail } from "../../services/auth/email";
import { parseAuthSettings } from "../../services/auth/settings";

describe("auth email - one form per address", () => {
  const same: Array<[string, string]> = [
    ["  Ann@Example.COM ", "ann@example.com"],
    ["ann@example.com.", "ann@example.com"],
    ["\uff41\uff4e\uff4e@\uff45xample.com", "ann@example.com"],
    ["\u00e1ngel@example.com", "\u00e1ngel@example.com"],
    ["a\u0301ngel@example.com", "\u00e1ngel@example.com"],
    ["ann@mail\u3002example\uff61com", "ann@mail.example.com"],
  ];
  test.each(same)("auth email - %j is %j", (raw, form) => {
    expect([normalizeEmail(raw), emailProblem(raw)]).toEqual([form, undefined]);
  });

  test("auth email - `á` and `a`, `ß` and `ss` stay different addresses", () => {
    expect(normalizeEmail("\u00e1ngel@example.com")).not.toBe(normalizeEmail("angel@example.com"));
    expect(normalizeEmail("stra\u00dfe@example.com")).not.toBe(normalizeEmail("strasse@example.com"));
  });

  const refused: Array<[string, string, RegExp]> = [
    ["a zero-width space", "a\u200bnn@example.com", /invisible/],
    ["a BOM inside", "ann\ufeff@example.com", /invisible/],
    ["a bidi override", "\u202eann@example.com", /invisible/],
    ["a C1 control", "ann\u0085@example.com", /invisible/],
    ["a variation selector", "ann\ufe0f@example.com", /invisible/],
    ["two @ once normalised (a fullwidth @)", "a\uff20b@example.com", /valid/],
    ["no dot in the domain", "ann@localhost", /valid/],
  ];
  test.each(refused)("auth email - %s is refused", (_, raw, problem) => expect(emailProblem(raw)).toMatch(problem));

  test("auth email - login refuses invisible characters only: a malformed address is merely unknown", () => {
    expect(emailProblem("ann@localhost", { invisibleOnly: true })).toBeUndefined();
    expect(emailProblem("a\u200dnn@example.com", { invisibleOnly: true })).toMatch(/invisible/);
  });

  test("auth email - ADMIN_EMAILS are normalised, and an invisible character in one refuses the start", () => {
    const env = { JWT_SECRET: "x".repeat(32), NODE_ENV: "test" };
    expect([...parseAuthSettings({ ...env, ADMIN_EMAILS: " Boss@Example.com. , \uff52oot@example.com" }).adminEmails]).toEqual([
      "boss@example.com",
      "root@example.com",
    ]);
    expect(() => parseAuthSettings({ ...env, ADMIN_EMAILS: "bo\u200bss@example.com" })).toThrow(/ADMIN_EMAILS/);
  });
});
