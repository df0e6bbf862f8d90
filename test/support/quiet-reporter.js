/**
 * jest's default reporter, except that a test file's console output (the services' expected
 * warnings, a test's own figures) is printed only when the file failed, or always with
 * TEST_LOG_LEVEL set (the services' level: a developer asking for their logs). Output is buffered
 * per file for that (jest.config.js: verbose false); with --verbose, jest's own verbose reporter
 * lists every test and prints the output as it comes.
 */
const { DefaultReporter, VerboseReporter } = require("@jest/reporters");

class QuietReporter extends DefaultReporter {
  printTestFileHeader(testPath, config, result) {
    const failed = Boolean(result.failureMessage) || result.numFailingTests > 0 || result.testExecError != null;
    super.printTestFileHeader(testPath, config, failed || process.env.TEST_LOG_LEVEL ? result : { ...result, console: undefined });
  }
}

module.exports = function Reporter(globalConfig) {
  return globalConfig.verbose ? new VerboseReporter(globalConfig) : new QuietReporter(globalConfig);
};
