/**
 * The start-up line about model providers: which are configured, whether each answers, and, when
 * none does, how to get one. Pure: the health record comes from the engine's check.
 */

export type ProviderTarget = { name: string; url: string };

const HOW_TO_GET_ONE =
  "to get one: install Ollama (curl -fsSL https://ollama.com/install.sh | sh) and run `ollama pull llama3.2:1b` " +
  '(OLLAMA_URL, default http://127.0.0.1:11434), or name an OpenAI-compatible server: OPENAI_PROVIDERS=\'[{"name":"vllm","url":"http://host:8000"}]\'';

/** One line: `Model providers: ollama (http://…) answers; vllm (http://…) does not answer`, plus the hint when none answers. */
export function providerReport(targets: ProviderTarget[], health: Record<string, boolean>): { line: string; anyAnswers: boolean } {
  if (targets.length === 0) return { line: `Model providers: none configured; ${HOW_TO_GET_ONE}`, anyAnswers: false };
  const parts = targets.map((t) => `${t.name} (${t.url}) ${health[t.name] ? "answers" : "does not answer"}`);
  const anyAnswers = targets.some((t) => health[t.name]);
  return { line: `Model providers: ${parts.join("; ")}${anyAnswers ? "" : `; inference will fail until one does. ${HOW_TO_GET_ONE}`}`, anyAnswers };
}
