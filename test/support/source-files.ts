/** The project's own sources, read as text by the structure tests (bus declarations, import cycles). */
import fs from "fs";
import path from "path";

/** Every .ts file under `dir`, subfolders included. */
export const tsFilesUnder = (dir: string): string[] =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const full = path.join(dir, d.name);
    return d.isDirectory() ? tsFilesUnder(full) : d.name.endsWith(".ts") ? [full] : [];
  });
