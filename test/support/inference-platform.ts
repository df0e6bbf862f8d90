/**
 * An inference test platform: the Ollama-format and OpenAI-format provider stand-ins ("vllm",
 * with an upstream API key), gateway + auth + inference against them, an account with a JWT and
 * an API key, the `openai` client on /v1, and a database client for the usage records.
 */
import OpenAI from "openai";
import { Client } from "pg";
import { http, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "./platform";
import { OllamaStandin, OpenAiStandin } from "./provider-standins";

export type Account = { token: string; apiKey: string };

export async function newAccount(baseUrl: string): Promise<Account> {
  const reg = await http(baseUrl, "POST", "/api/auth/register", {
    body: { email: `${uniqueName("inf")}@example.com`, name: "Inference", password: "password-123" },
  });
  if (reg.status !== 201) throw new Error(`register answered ${reg.status}: ${JSON.stringify(reg.body)}`);
  const token = reg.body.accessToken as string;
  const key = await http(baseUrl, "POST", "/api/auth/api-keys", { token });
  if (key.status !== 201) throw new Error(`api-keys answered ${key.status}: ${JSON.stringify(key.body)}`);
  return { token, apiKey: key.body.apiKey as string };
}

/** A chat against each provider stand-in: a model it serves, and the path its chat requests arrive on. */
export const chatKinds = (p: () => InferencePlatform) => [
  { label: "the Ollama-format provider", model: "llama3.2:1b", standin: (): OllamaStandin | OpenAiStandin => p().ollama, path: "/api/chat" },
  {
    label: "the OpenAI-format provider",
    model: "Qwen/Qwen2.5-7B-Instruct",
    standin: (): OllamaStandin | OpenAiStandin => p().vllm,
    path: "/v1/chat/completions",
  },
];

/** What the stand-in of `kind` received last: the messages, and the options each under the name its wire format gives it. */
export function sentChat(kind: ReturnType<typeof chatKinds>[number]) {
  const sent = kind.standin().lastRequest(kind.path)!.body;
  const ollama = kind.path === "/api/chat";
  const options = ollama ? sent.options : sent;
  return { messages: sent.messages, options, maxTokens: ollama ? options.num_predict : options.max_tokens, user: sent.user };
}

/** Turns that OpenAI's and Anthropic's APIs write alike (text parts or blocks, plain strings), sent after the system prompt "Be brief.". */
export const skyTurns = () => [
  { role: "user" as const, content: [textPart("Why is the sky "), textPart("blue?")] },
  { role: "assistant" as const, content: "Scattering." },
  { role: "user" as const, content: "More?" },
];
const textPart = (text: string) => ({ type: "text" as const, text });

/** What a provider receives of the system prompt and skyTurns(). */
export const SKY_SENT = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Why is the sky blue?" },
  { role: "assistant", content: "Scattering." },
  { role: "user", content: "More?" },
];

/** The official client on `<base>/v1`; no retries, so a test sees each answer. */
export const openAiClient = (baseUrl: string, apiKey: string) => new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0 });

/** The two stand-ins as test cases (`p` is read when a test runs): the model each serves, and the path its chats reach. */
export const providerKinds = (p: () => InferencePlatform) => [
  { label: "the Ollama-format provider", model: "llama3.2:1b", standin: (): OllamaStandin | OpenAiStandin => p().ollama, path: "/api/chat" },
  {
    label: "the OpenAI-format provider",
    model: "Qwen/Qwen2.5-7B-Instruct",
    standin: (): OllamaStandin | OpenAiStandin => p().vllm,
    path: "/v1/chat/completions",
  },
];

/** The body of the last chat request the stand-in of `kind` received. */
export const sentTo = (kind: ReturnType<typeof providerKinds>[number]) => kind.standin().lastRequest(kind.path)!.body;

/** Both stand-ins back to their default script, every model taking tools. */
export function resetStandins(p: InferencePlatform): void {
  for (const standin of [p.ollama, p.vllm]) {
    standin.set({});
    standin.withoutTools.clear();
  }
}

/** The error a call fails with (the test fails when it does not). */
export async function openAiErrorOf(work: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await work;
  } catch (err) {
    return err as InstanceType<typeof OpenAI.APIError>;
  }
  throw new Error("expected the call to fail");
}

export type InferencePlatform = Account & {
  ollama: OllamaStandin;
  vllm: OpenAiStandin;
  platform: TestPlatform;
  db: Client;
  client: OpenAI;
  /** The usage record of an inference (a /v1 id's `chatcmpl-` prefix is dropped), once written. */
  recordOf(id: string): Promise<Record<string, any>>;
  stop(): Promise<void>;
};

export async function startInferencePlatform(
  env: Record<string, string> = {},
  platformOpts: Parameters<typeof startTestPlatform>[0] = {},
): Promise<InferencePlatform> {
  const ollama = await new OllamaStandin().start();
  const vllm = await new OpenAiStandin().start();
  vllm.apiKey = "sk-upstream";
  const platform = await startTestPlatform({
    services: ["api-gateway", "auth", "inference"],
    ...platformOpts,
    env: { OLLAMA_URL: ollama.url, OPENAI_PROVIDERS: JSON.stringify([{ name: "vllm", url: vllm.url, apiKey: "sk-upstream" }]), ...env },
  });
  let account: Account;
  const db = new Client({ connectionString: platform.databaseUrl });
  try {
    await waitForRoute(platform.baseUrl, "GET", "/api/models/health");
    // The gateway learns each service's routes as it is discovered: auth's may come after inference's.
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/register");
    account = await newAccount(platform.baseUrl);
    await db.connect();
  } catch (err) {
    // a set-up that fails stops what it started: left running, it would keep jest from exiting
    await Promise.allSettled([db.end(), platform.stop(), ollama.stop(), vllm.stop()]);
    throw err;
  }
  return {
    ...account,
    ollama,
    vllm,
    platform,
    db,
    client: openAiClient(platform.baseUrl, account.apiKey),
    recordOf: (id) =>
      waitFor(async () => (await db.query("SELECT * FROM inference.inferences WHERE id = $1", [id.replace(/^chatcmpl-/, "")])).rows[0], {
        message: `inference ${id} to be recorded`,
      }),
    async stop() {
      await db.end();
      await platform.stop();
      await ollama.stop();
      await vllm.stop();
    },
  };
}
