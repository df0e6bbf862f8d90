/** The start-up line about model providers (services/inference/startup-report.ts). */
import { providerReport } from "../../services/inference/startup-report";

describe("inference startup report - the providers and whether each answers", () => {
  const ollama = { name: "ollama", url: "http://127.0.0.1:11434" };
  const vllm = { name: "vllm", url: "http://gpu:8000" };
  test("inference startup report - one answers: named with its URL, no hint", () => {
    const { line, anyAnswers } = providerReport([ollama, vllm], { ollama: false, vllm: true });
    expect(anyAnswers).toBe(true);
    expect(line).toBe("Model providers: ollama (http://127.0.0.1:11434) does not answer; vllm (http://gpu:8000) answers");
  });
  test("inference startup report - none answers or none configured: how to get one", () => {
    for (const { line, anyAnswers } of [providerReport([ollama], { ollama: false }), providerReport([], {})]) {
      expect(anyAnswers).toBe(false);
      expect(line).toContain("curl -fsSL https://ollama.com/install.sh | sh");
      expect(line).toContain("ollama pull llama3.2:1b");
      expect(line).toContain("OPENAI_PROVIDERS=");
    }
  });
});
