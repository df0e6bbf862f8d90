/**
 * One comparable form for an e-mail, so that look-alikes cannot become separate accounts: trimmed,
 * NFKC (fullwidth `ａ` is `a`; `á` composed and `a` + U+0301 are one; `á` and `a` stay distinct),
 * lower-cased as before (not full case folding: `ß` is not `ss`), ideographic full stops read as
 * dots, and the domain's trailing dot(s) dropped. Invisible and control characters (zero-width
 * space and joiners, BOM, bidi controls, soft hyphen, C0/C1 controls) are refused, not removed.
 * Migration 3 computes the same form in SQL for the accounts that existed before.
 */

/**
 * Controls, format characters (ZWSP, ZWJ, BOM, bidi), default-ignorables (fillers, variation selectors), line/paragraph separators,
 * and the blank glyphs Unicode counts as visible symbols (U+2800 Braille pattern blank, U+1D159 musical null notehead).
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}\u2800\u{1D159}]/u;
/** Ideographic and halfwidth ideographic full stops, which NFKC leaves alone but domains read as dots. */
const IDEOGRAPHIC_STOPS = /[\u3002\uff61]/g;
/** One `@`, no white space, a dot in the domain: the shape the register rule checked, on the normalised form. */
const SHAPE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/u;

const INVISIBLE_PROBLEM = "An e-mail address may not contain invisible or control characters";

/** The normalised form of an e-mail without invisible characters (checked by emailProblem). */
export const normalizeEmail = (raw: string): string =>
  raw.trim().normalize("NFKC").toLowerCase().normalize("NFKC").replace(IDEOGRAPHIC_STOPS, ".").replace(/\.+$/, "");

/** Why `raw` cannot be an account's e-mail: invisible characters (anywhere but trimmed white space), or not an address once normalised. */
export function emailProblem(raw: string, opts: { invisibleOnly?: boolean } = {}): string | undefined {
  if (INVISIBLE.test(raw.trim())) return INVISIBLE_PROBLEM;
  const email = normalizeEmail(raw);
  if (INVISIBLE.test(email)) return INVISIBLE_PROBLEM;
  if (!opts.invisibleOnly && !SHAPE.test(email)) return "Not a valid e-mail address";
  return undefined;
}
