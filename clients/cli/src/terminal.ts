/**
 * Text that someone else wrote (a job's output, a model's reply) on the user's terminal: its control
 * characters are shown, not obeyed, in `cat -v` notation (ESC is `^[`, BEL `^G`, U+009B `M-^[`), so
 * it cannot set the window title, write the clipboard (OSC 52), clear the screen or move the cursor.
 * Kept as they are: line feed, tab, carriage return (progress bars redraw their line with it; it
 * moves the cursor to the start of the same line and nothing else), and SGR colour sequences
 * (`ESC [ … m`, as `less -R` keeps them). `--raw`, or a stream that is not a terminal: untouched.
 */

/* eslint-disable no-control-regex -- control characters are what these match */
/** Colour and style only: parameters, then `m`. */
const SGR = /^\x1b\[[0-9;:]{0,32}m/;
/** A chunk's tail that may be the start of an SGR sequence the next chunk completes. */
const SGR_START = /\x1b(?:\[[0-9;:]{0,32})?$/;
/** C0 controls but tab, line feed and carriage return; DEL; C1 controls. */
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;
/* eslint-enable no-control-regex */

/** `cat -v` notation of one control character. */
function visible(char: string): string {
  const code = char.charCodeAt(0);
  if (code === 0x7f) return "^?";
  if (code >= 0x80) return `M-${visible(String.fromCharCode(code - 0x80))}`;
  return `^${String.fromCharCode(code + 0x40)}`;
}

/** `text` with every control character but \n, \t, \r and SGR sequences shown in `cat -v` notation. */
export function neutralise(text: string): string {
  let out = "";
  let from = 0;
  for (let at = text.indexOf("\x1b"); at !== -1; at = text.indexOf("\x1b", from)) {
    const sgr = SGR.exec(text.slice(at, at + 40))?.[0];
    out += text.slice(from, at).replace(CONTROL, visible) + (sgr ?? "^[");
    from = at + (sgr ? sgr.length : 1);
  }
  return out + text.slice(from).replace(CONTROL, visible);
}

export type TextSink = { write(text: string): void; end(): void };

/**
 * Writes chunks of someone else's text to `stream`: neutralised on a terminal (an SGR sequence
 * split across two chunks is held back until it is complete), as they are with `raw` or elsewhere.
 */
export function untrustedText(stream: NodeJS.WritableStream & { isTTY?: boolean }, raw = false): TextSink {
  if (raw || !stream.isTTY) return { write: (text) => void stream.write(text), end: () => undefined };
  let held = "";
  return {
    write(text) {
      const all = held + text;
      held = SGR_START.exec(all)?.[0] ?? "";
      const ready = all.slice(0, all.length - held.length);
      if (ready) stream.write(neutralise(ready));
    },
    end() {
      if (held) stream.write(neutralise(held));
      held = "";
    },
  };
}

/** The `--raw` option of the commands that print someone else's text. */
export const rawOption = [
  "raw",
  { type: "boolean", describe: "write the text as received, control sequences included (else shown, not obeyed, on a terminal)" },
] as const;

/** One piece of someone else's text for `stream`: neutralised when it is a terminal. */
export const forTerminal = (stream: { isTTY?: boolean }, text: string) => (stream.isTTY ? neutralise(text) : text);
