/**
 * Writes the run's closing lines to test-results/summary.txt; .ci/run prints them (jest's own
 * summary is printed after every reporter): "N passed, N failed, N skipped", the failed tests by
 * file (a CI log shows only its end), then the slowest test files with their seconds, so a CI log
 * says what failed and where the run's time went.
 */
const fs = require("fs");
const path = require("path");

const SLOWEST_SHOWN = 15;
const FAILED_SHOWN = 10;

const firstLine = (text) =>
  String(text ?? "")
    .split("\n")
    .find((l) => l.trim() !== "") ?? "";

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests, testResults } = results;
    const root = path.resolve(__dirname, "../..");
    const files = testResults
      .map((r) => ({ file: path.relative(root, r.testFilePath), seconds: (r.perfStats.end - r.perfStats.start) / 1000 }))
      .sort((a, b) => b.seconds - a.seconds);
    const total = files.reduce((sum, f) => sum + f.seconds, 0);
    const lines = [`${numPassedTests} passed, ${numFailedTests} failed, ${numPendingTests + numTodoTests} skipped`];
    for (const r of testResults) {
      const failed = r.testResults.filter((t) => t.status === "failed").map((t) => t.fullName);
      // A file that failed outside its tests (a hook, a syntax error) has its message only.
      if (failed.length === 0 && !r.testExecError && !r.failureMessage) continue;
      lines.push(`FAILED ${path.relative(root, r.testFilePath)}`);
      for (const name of failed.slice(0, FAILED_SHOWN)) lines.push(`  - ${name}`);
      if (failed.length > FAILED_SHOWN) lines.push(`  … and ${failed.length - FAILED_SHOWN} more`);
      if (failed.length === 0) lines.push(`  ${firstLine(r.testExecError?.message ?? r.failureMessage)}`);
    }
    if (files.length > 1) {
      lines.push(`${files.length} files, ${total.toFixed(0)} s in test files; the slowest:`);
      for (const f of files.slice(0, SLOWEST_SHOWN)) lines.push(`  ${f.seconds.toFixed(1).padStart(7)} s  ${f.file}`);
    }
    const dir = path.join(root, "test-results");
    fs.mkdirSync(dir, { recursive: true });
    // TEST_SUMMARY_FILE: another name, for a second jest process beside the first (scripts/test.sh).
    fs.writeFileSync(path.join(dir, process.env.TEST_SUMMARY_FILE || "summary.txt"), lines.join("\n") + "\n");
  }
}
module.exports = SummaryReporter;
