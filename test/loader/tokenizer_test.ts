/**
 * The tokenizer's piece cache: text between added tokens is tokenized on its own and long pieces are kept,
 * so a resent system prompt is not tokenized again. The ids must equal tokenizing the whole text at once.
 */
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { describe, expect, test } from "vitest";
import { Tokenizer } from "../../src/loader/tokenizer.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";

const src = new DiskModelSource(DEFAULT_MODEL);
const tok = await Tokenizer.load(src);
const whole = new HfTokenizer(
  JSON.parse(await src.readText("tokenizer.json")),
  JSON.parse(await src.readText("tokenizer_config.json")),
);
const raw = (t: string) => whole.encode(t, { add_special_tokens: false }).ids;

/** Seeded text with the boundaries BPE cares about: spaces, newlines, digits, unicode, code. */
function text(seed: number, chars: number): string {
  const words = [
    "def",
    " x",
    "  ",
    "\n",
    "\n\n",
    "é",
    "日本",
    "123",
    " 45",
    "\t",
    "(",
    "):",
    "🙂",
    " ",
    "_a",
    "'s",
  ];
  let x = seed;
  let out = "";
  while (out.length < chars) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out += words[(x >>> 8) % words.length];
  }
  return out;
}

describe("tokenizer piece cache", () => {
  test("chat-rendered prompts tokenize to the same ids as the whole text, the first time and again", () => {
    for (let seed = 1; seed <= 6; seed++) {
      const sys = text(seed, 2000 + 300 * seed);
      const rendered = tok.applyChatTemplate([
        { role: "system", content: sys },
        { role: "user", content: `${text(seed + 50, 400)} <|im_end|>${text(seed + 90, 300)}` },
        { role: "assistant", content: text(seed + 70, 30) },
        { role: "user", content: `  ${text(seed + 80, 700)}\n` },
      ]);
      const want = raw(rendered);
      expect(tok.encode(rendered)).toEqual(want);
      expect(tok.encode(rendered)).toEqual(want); // from the cache
      // The system prompt's piece, now cached, inside a different conversation.
      const other = tok.applyChatTemplate([{ role: "system", content: sys }, {
        role: "user",
        content: "ok",
      }]);
      expect(tok.encode(other)).toEqual(raw(other));
    }
  });

  test("text without added tokens, and text that is only added tokens", () => {
    const plain = text(7, 5000);
    expect(tok.encode(plain)).toEqual(raw(plain));
    const only = "<|im_start|><|im_end|><|endoftext|>".repeat(100);
    expect(tok.encode(only)).toEqual(raw(only));
  });
});
