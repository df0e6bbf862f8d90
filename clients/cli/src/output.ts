/**
 * How results are shown: tables (cli-table3) and bars for people, JSON for scripts (`--json`);
 * colour and the live status line only when the stream is a terminal.
 */
import Table from "cli-table3";
import { styleText } from "util";
import { forTerminal, neutralise } from "./terminal";

export type Out = { json: boolean; stdout: NodeJS.WriteStream; stderr: NodeJS.WriteStream };

export const isTty = (stream: NodeJS.WriteStream) => Boolean(stream.isTTY) && !process.env.NO_COLOR;

type Style = Parameters<typeof styleText>[0];
export const paint = (stream: NodeJS.WriteStream, style: Style, text: string) => (isTty(stream) ? styleText(style, text) : text);

const STATUS_STYLE: Record<string, Style> = { queued: "yellow", running: "cyan", completed: "green", failed: "red", cancelled: "gray" };
export const statusText = (stream: NodeJS.WriteStream, status: string) => paint(stream, STATUS_STYLE[status] ?? "reset", status);

export function printJson(out: Out, value: unknown): void {
  out.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

/** A table of rows, or the JSON value for scripts. */
export function printTable(out: Out, head: string[], rows: Array<Array<string | number>>, json: unknown): void {
  if (out.json) return printJson(out, json);
  if (!rows.length) {
    out.stderr.write("(none)\n");
    return;
  }
  const table = new Table({ head, style: { head: isTty(out.stdout) ? ["bold"] : [], border: [] } });
  // Cells hold the platform's and providers' text (model descriptions, reasons): shown, not obeyed.
  table.push(...rows.map((r) => r.map((cell) => forTerminal(out.stdout, String(cell)))));
  out.stdout.write(table.toString() + "\n");
}

/** `key  value` lines for one object, or its JSON. */
export function printRecord(out: Out, record: Record<string, unknown>): void {
  if (out.json) return printJson(out, record);
  const width = Math.max(...Object.keys(record).map((k) => k.length));
  for (const [key, value] of Object.entries(record)) {
    const text = value === null || value === undefined ? "-" : typeof value === "object" ? JSON.stringify(value) : String(value);
    out.stdout.write(`${key.padEnd(width)}  ${forTerminal(out.stdout, text)}\n`);
  }
}

/** `███░░░░ 42%`: a share of `total` as a bar `width` cells long. */
export function bar(value: number, total: number, width = 10): string {
  const share = total > 0 ? Math.min(1, Math.max(0, value / total)) : 0;
  const full = Math.round(share * width);
  return "█".repeat(full) + "░".repeat(width - full);
}

export const truncate = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** A line rewritten in place on a terminal (progress); nothing elsewhere. */
export function liveLine(stream: NodeJS.WriteStream) {
  const on = isTty(stream);
  return {
    update(text: string) {
      if (on) stream.write(`\r\x1b[2K${neutralise(text)}`);
    },
    done() {
      if (on) stream.write("\r\x1b[2K");
    },
  };
}
