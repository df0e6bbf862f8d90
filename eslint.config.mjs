// @ts-check
/**
 * `npm run lint` (part of `npm test`): eslint's and typescript-eslint's `recommended`, plus the
 * type-checked rules that catch real faults in async Moleculer code (a promise nobody handles, a
 * promise where a callback's return is ignored or a boolean is tested). The rest of
 * `recommendedTypeChecked` mostly flags the `any` that Moleculer's own types hand out.
 */
import eslint from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["node_modules/", "**/dist/", "coverage/", "test-results/", "bench/results/", "scratch/", "docker/nats-tls/"] },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  {
    // The web console: browser modules served as they are (no build step), so the browser's globals.
    files: ["console/**/*.js"],
    languageOptions: {
      sourceType: "module",
      globals: Object.fromEntries(
        [
          "window",
          "document",
          "location",
          "navigator",
          "fetch",
          "Node",
          "TextDecoder",
          "AbortController",
          "setTimeout",
          "clearTimeout",
          "setInterval",
          "clearInterval",
          "sessionStorage",
          "atob",
          "URL",
        ].map((g) => [g, "readonly"]),
      ),
    },
  },
  {
    // Build steps run by plain Node (the SDK's finish-build.mjs).
    files: ["clients/*/scripts/*.mjs"],
    languageOptions: { globals: { console: "readonly", process: "readonly" } },
  },
  {
    files: ["**/*.ts"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      // tsc's noUnusedLocals/noUnusedParameters report these already: one report per fault.
      "@typescript-eslint/no-unused-vars": "off",
    },
  },
  {
    // Dependencies point down: lib/ holds the protocols and helpers services build on (type imports included).
    files: ["lib/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["../services/*", "**/services/**"], message: "lib/ must not import services/: move the shape to lib/ or the emitter's contract" },
          ],
        },
      ],
    },
  },
  {
    files: ["moleculer.config.ts"],
    // The registry loads a service's module only when SERVICES names it.
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
  {
    files: ["test/**", "bench/**"],
    // Tests and benches assert on untyped JSON (response bodies, compose and Kubernetes manifests).
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    files: ["**/*.js"],
    // jest's CommonJS config and reporter; the CLI's bin/ launcher.
    languageOptions: { sourceType: "commonjs", globals: { require: "readonly", module: "writable", __dirname: "readonly", process: "readonly" } },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
);
