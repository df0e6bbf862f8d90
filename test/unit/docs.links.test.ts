/** Every relative link of the README, docs/ and bench/RESULTS.md names a file that exists, and a heading of it when it has an anchor. */
import { existsSync, readdirSync, readFileSync } from "fs";
import path from "path";

const ROOT = path.resolve(__dirname, "../..");
const PAGES = [
  "README.md",
  "bench/RESULTS.md",
  ...readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced blocks and inline code, where links are links. */
const prose = (markdown: string): string => markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");

/** GitHub's anchors of a page's headings (github-slugger: lower case, punctuation dropped, spaces to hyphens, repeats numbered). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/** `[text](target)` links that stay in this repository. */
const relativeLinks = (markdown: string): string[] =>
  [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));

/** What is wrong with each relative link of `page` (a path from the repository root). */
function brokenLinks(page: string, read = (file: string) => readFileSync(file, "utf8")): string[] {
  const from = path.join(ROOT, page);
  const problems: string[] = [];
  for (const target of relativeLinks(read(from))) {
    const [file, anchor] = target.split("#");
    const resolved = file ? path.resolve(path.dirname(from), decodeURI(file)) : from;
    if (!existsSync(resolved)) problems.push(`${page}: ${target}: no such file`);
    else if (anchor !== undefined && resolved.endsWith(".md") && !anchors(read(resolved)).has(anchor)) problems.push(`${page}: ${target}: no such heading`);
  }
  return problems;
}

describe("docs - links", () => {
  it("docs - the pages checked include the README, every docs page and the benchmark results", () => {
    expect(PAGES).toEqual(expect.arrayContaining(["README.md", "bench/RESULTS.md", "docs/README.md", "docs/configuration.md", "docs/errors.md"]));
  });

  it.each(PAGES)("docs - every relative link of %s points at an existing file and heading", (page) => {
    expect(brokenLinks(page)).toEqual([]);
  });

  it("docs - a missing file, a missing heading and a renamed heading are reported; outside links and code are not links", () => {
    const pages: Record<string, string> = {
      [path.join(ROOT, "docs/a.md")]:
        "# A page\n## Job isolation (gpu-node)\n[ok](#job-isolation-gpu-node) [gone](missing.md) [bad](#nope) [web](https://example.com/x.md) `[code](nope.md)`\n",
    };
    const read = (file: string) => pages[file] ?? readFileSync(file, "utf8");
    expect(relativeLinks(pages[path.join(ROOT, "docs/a.md")])).toEqual(["#job-isolation-gpu-node", "missing.md", "#nope"]);
    // docs/a.md does not exist on disk, so even its own anchors are "no such file": check the anchor logic on its own.
    expect([...anchors(pages[path.join(ROOT, "docs/a.md")])]).toEqual(["a-page", "job-isolation-gpu-node"]);
    expect(brokenLinks("docs/README.md", (file) => (file.endsWith("docs/README.md") ? "[x](nowhere.md) [y](errors.md#no-such)" : read(file)))).toEqual([
      "docs/README.md: nowhere.md: no such file",
      "docs/README.md: errors.md#no-such: no such heading",
    ]);
  });
});
