/**
 * Writes one plain line, "N passed, N failed, N skipped", to test-results/summary.txt; .ci/run
 * prints it as the run's closing line (jest's own summary is printed after every reporter).
 */
const fs = require("fs");
const path = require("path");

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests } = results;
    const dir = path.resolve(__dirname, "../../test-results");
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "summary.txt"), `${numPassedTests} passed, ${numFailedTests} failed, ${numPendingTests + numTodoTests} skipped\n`);
  }
}
module.exports = SummaryReporter;
