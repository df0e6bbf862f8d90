import { bitsPerWeight, describeModel, estimateTokens, formatBillions, parameterSizeOf, SizeHints, sizeFromName } from "../../services/inference/model-info";

const SIZE_FORM = /^\d+(\.\d+)?B$/;

describe("inference - parameterSize", () => {
  const cases: Array<[string, SizeHints, string]> = [
    ["Ollama's billions are kept, without a trailing .0", { reported: "8.0B", name: "llama3.1:8b" }, "8B"],
    ["Ollama's decimal billions", { reported: "3.2B", name: "llama3.2" }, "3.2B"],
    ["millions become tenths of a billion", { reported: "494.03M", name: "qwen2.5:0.5b" }, "0.5B"],
    ["tiny models floor at 0.1B", { reported: "22M", name: "all-minilm" }, "0.1B"],
    ["trillions become billions", { reported: "1.5T", name: "big" }, "1500B"],
    ["a lowercase unit", { reported: "7b", name: "x" }, "7B"],
    ["an unreadable report falls back to the name", { reported: "unknown", name: "mistral:7b" }, "7B"],
    ["llama.cpp's parameter count", { params: 8_030_261_312, name: "model.gguf" }, "8B"],
    ["the name: Ollama tag", { name: "llama3.2:1b" }, "1B"],
    ["the name: decimal size", { name: "qwen2.5-0.5b-instruct" }, "0.5B"],
    ["the name: Hugging Face id", { name: "meta-llama/Llama-3.1-8B-Instruct" }, "8B"],
    ["the name: millions", { name: "gemma3:270m" }, "0.3B"],
    ["the name: mixture of experts", { name: "mixtral:8x7b" }, "56B"],
    ["the name: the total, not the active parameters", { name: "Qwen3-30B-A3B" }, "30B"],
    ["the name: a GGUF file", { name: "Llama-3.2-1B-Instruct-Q4_K_M.gguf" }, "1B"],
    ["file size and quantization", { name: "phi3:mini", sizeBytes: 2_176_178_913, quantization: "Q4_0" }, "3.9B"],
    ["file size of a 16-bit model", { name: "custom", sizeBytes: 2_000_000_000, quantization: "F16" }, "1B"],
    ["a version number is not a size", { name: "llama3.2" }, "0B"],
    ["nothing to go on is 0B (unknown)", { name: "gpt-4o-mini" }, "0B"],
  ];
  test.each(cases)("inference - parameterSize: %s", (_name, hints, expected) => {
    const size = parameterSizeOf(hints);
    expect(size).toBe(expected);
    expect(size).toMatch(SIZE_FORM);
  });

  test("inference - formatBillions refuses non-positive and non-finite values", () => {
    expect(formatBillions(0)).toBeUndefined();
    expect(formatBillions(-1)).toBeUndefined();
    expect(formatBillions(Number.NaN)).toBeUndefined();
    expect(formatBillions(70.55)).toBe("70.6B");
  });

  test("inference - sizeFromName and bitsPerWeight read what they can", () => {
    expect(sizeFromName("deepseek-r1:1.5b")).toBe(1.5);
    expect(sizeFromName("nomic-embed-text")).toBeUndefined();
    expect(bitsPerWeight("Q8_0")).toBe(8.5);
    expect(bitsPerWeight("BF16")).toBe(16);
    expect(bitsPerWeight("weird")).toBeUndefined();
  });
});

describe("inference - model description", () => {
  test.each([
    [
      "Ollama details",
      { provider: "ollama", parameterSize: "3.2B", family: "llama", quantization: "Q4_K_M", format: "gguf" },
      "llama model with 3.2B parameters (Q4_K_M, GGUF), served by ollama",
    ],
    [
      "an OpenAI-compatible model with an owner",
      { provider: "vllm", parameterSize: "7B", owner: "Qwen" },
      "Model with 7B parameters, served by vllm (owned by Qwen)",
    ],
    ["the owner is the provider itself", { provider: "vllm", parameterSize: "7B", owner: "vllm" }, "Model with 7B parameters, served by vllm"],
    ["unknown size", { provider: "hosted", parameterSize: "0B" }, "Model of unknown size, served by hosted"],
  ])("inference - description: %s", (_name, hints, expected) => {
    expect(describeModel(hints)).toBe(expected);
  });

  test("inference - estimateTokens counts about four characters a token", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abc")).toBe(1);
    expect(estimateTokens("abcdefghi")).toBe(3);
  });
});
