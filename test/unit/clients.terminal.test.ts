/** The CLI's handling of someone else's text on a terminal, and of a job's argv: tables of cases, no platform. */
import { Writable } from "stream";
import { jobCommand, shellWord } from "../../clients/cli/src/jobs";
import { neutralise, untrustedText } from "../../clients/cli/src/terminal";

/** A stream that records what is written, a terminal or not. */
function sink(isTTY: boolean) {
  const written: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk, _enc, done) {
        written.push(String(chunk));
        done();
      },
    }),
    { isTTY },
  );
  return { stream, text: () => written.join("") };
}

describe("clients terminal - control sequences are shown, not obeyed", () => {
  const cases: Array<[string, string, string]> = [
    ["an OSC 0 title write", "\x1b]0;pwned\x07", "^[]0;pwned^G"],
    ["an OSC 52 clipboard write (ST-terminated)", "\x1b]52;c;cHduZWQ=\x1b\\", "^[]52;c;cHduZWQ=^[\\"],
    ["a screen clear and cursor home", "\x1b[2J\x1b[H", "^[[2J^[[H"],
    ["a C1 CSI (U+009B) and a DEL", "\x9b2J\x7f", "M-^[2J^?"],
    ["NUL, backspace, vertical tab, form feed", "\x00\b\v\f", "^@^H^K^L"],
    ["line feed, tab and carriage return are kept", "50%\r100%\tdone\n", "50%\r100%\tdone\n"],
    ["SGR colours are kept", "\x1b[1;31mred\x1b[0m \x1b[38:5:208mx\x1b[m", "\x1b[1;31mred\x1b[0m \x1b[38:5:208mx\x1b[m"],
    ["an SGR-looking start of another sequence", "\x1b[31;1H", "^[[31;1H"],
    ["printable text, accents and emoji", "héllo ✓ 🚀", "héllo ✓ 🚀"],
  ];
  test.each(cases)("clients terminal - %s", (_, input, shown) => expect(neutralise(input)).toBe(shown));

  test("clients terminal - a sequence split across chunks is judged whole; a lone ESC at the end is shown at end()", () => {
    const tty = sink(true);
    const out = untrustedText(tty.stream);
    for (const chunk of ["a\x1b", "[3", "1mred\x1b", "]0;t\x07b\x1b"]) out.write(chunk);
    out.end();
    expect(tty.text()).toBe("a\x1b[31mred^[]0;t^Gb^[");
  });

  test("clients terminal - --raw, or a stream that is not a terminal, gets the bytes as they are", () => {
    const text = "\x1b]0;pwned\x07\x1b[2J";
    for (const [isTTY, raw] of [
      [true, true],
      [false, false],
    ]) {
      const s = sink(isTTY);
      const out = untrustedText(s.stream, raw);
      out.write(text);
      out.end();
      expect(s.text()).toBe(text);
    }
  });
});

describe("clients terminal - jobs run keeps the argv", () => {
  const cases: Array<[string, string[], string]> = [
    ["one word is a shell command as written", ["echo a; exit 3"], "echo a; exit 3"],
    ["plain words stay plain", ["echo", "from", "json"], "echo from json"],
    ["sh -c keeps its script as one word", ["sh", "-c", "echo hello; exit 3"], "sh -c 'echo hello; exit 3'"],
    ["quotes, $, newlines and empty words", ["printf", "it's", "$HOME", "a\nb", ""], "printf 'it'\\''s' '$HOME' 'a\nb' ''"],
    ["an assignment-looking or reserved first word is quoted", ["FOO=1", "time"], "'FOO=1' 'time'"],
  ];
  test.each(cases)("clients terminal - %s", (_, words, command) => expect(jobCommand(words)).toBe(command));

  test("clients terminal - shellWord quotes globs, tildes and spaces", () => {
    expect(["*", "~", "a b", "x/y-1.2:3@4%5,6+7"].map(shellWord)).toEqual(["'*'", "'~'", "'a b'", "x/y-1.2:3@4%5,6+7"]);
  });
});
