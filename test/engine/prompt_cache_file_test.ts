/**
 * Prompt-cache files through the real CLIs: `cache-prompt` reads a document once, `generate
 * --prompt-cache-file` continues it from the file with the same greedy ids as reading it all, and a file
 * made for another KV format or a file that is not a prompt cache is refused with a message naming it.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_MODEL, ROOT } from "../util/fixtures.ts";

let dir: string;
const DOC = Array.from(
  { length: 40 },
  (_, i) => `def step_${i}(x):\n    return x * ${i + 3} + ${(i * 7) % 11}  # stage ${i}\n`,
).join("");
const QUESTION = "def final(x):\n    return";

async function cli(script: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}src/cli/${script}`, ...args],
    env: { XDG_RUNTIME_DIR: "/tmp" },
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

beforeAll(async () => {
  dir = await Deno.makeTempDir({ prefix: "flint_prompt_cache_" });
  await Deno.writeTextFile(`${dir}/doc.txt`, DOC);
  await Deno.writeTextFile(`${dir}/whole.txt`, DOC + QUESTION);
});
afterAll(async () => await Deno.remove(dir, { recursive: true }));

describe("prompt-cache files", () => {
  test("cache-prompt, then generate --prompt-cache-file: same ids as reading the whole prompt", async () => {
    const made = await cli("cache_prompt.ts", [
      "--prompt-file",
      `${dir}/doc.txt`,
      "--out",
      `${dir}/doc.flint`,
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toMatch(/prompt tokens \(\d+ as KV pages/);
    const gen = ["--max-tokens", "12", "--json", "--context-window", "2048"];
    const cached = await cli("generate.ts", [
      ...gen,
      "--prompt-cache-file",
      `${dir}/doc.flint`,
      "--prompt",
      QUESTION,
    ]);
    expect(cached.code, cached.stderr).toBe(0);
    const a = JSON.parse(cached.stdout.trim().split("\n").pop()!);
    const whole = await cli("generate.ts", [...gen, "--prompt-file", `${dir}/whole.txt`]);
    const b = JSON.parse(whole.stdout.trim().split("\n").pop()!);
    // The document ends in a newline, so tokenizing it apart from the question changes no token.
    expect(a.prompt_tokens).toBe(b.prompt_tokens);
    expect(a.cached_tokens).toBeGreaterThan(0.9 * a.prompt_tokens - 16);
    expect(b.cached_tokens).toBe(0);
    expect(a.token_ids).toEqual(b.token_ids);
  });

  test("another KV cache format is refused, naming the file", async () => {
    const r = await cli("generate.ts", [
      "--kv-cache",
      "q8",
      "--prompt-cache-file",
      `${dir}/doc.flint`,
      "--prompt",
      "x",
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `--prompt-cache-file ${dir}/doc.flint: made for another model or KV cache format`,
    );
  });

  test("a file that is not a prompt cache is refused, naming the file", async () => {
    const r = await cli("generate.ts", [
      "--prompt-cache-file",
      `${DEFAULT_MODEL}/model.safetensors`,
      "--prompt",
      "x",
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("not a Flint prompt-cache file");
  });
});
