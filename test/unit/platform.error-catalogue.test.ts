/** The error catalogue (lib/errors.ts) and the Errors table of docs/errors.md list the same codes with the same statuses. */
import { readFileSync } from "fs";
import path from "path";
import { ErrorCodes } from "../../lib/errors";

function documentedCodes(): Record<string, number> {
  const page = readFileSync(path.resolve(__dirname, "../../docs/errors.md"), "utf8");
  const section = page.split(/^# Errors$/m)[1];
  const codes: Record<string, number> = {};
  // Rows: `| 502 / 503 / 504 | PROVIDER_ERROR / SERVICE_UNAVAILABLE / PROVIDER_TIMEOUT | …`, or one status for several codes.
  for (const [, statusCell, codeCell] of section.matchAll(/^\| ([\d /]+) \| ([A-Z_, /]+) \|/gm)) {
    const statuses = statusCell.split("/").map((s) => Number(s.trim()));
    const names = codeCell.split(/[,/]/).map((c) => c.trim());
    names.forEach((name, i) => (codes[name] = statuses.length === names.length ? statuses[i] : statuses[0]));
  }
  return codes;
}

describe("platform - error catalogue", () => {
  it("platform - every code of lib/errors.ts is in the Errors table of docs/errors.md with its status, and no other", () => {
    expect(documentedCodes()).toEqual({ ...ErrorCodes });
  });
});
