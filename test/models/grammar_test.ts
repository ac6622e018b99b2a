/**
 * Constrained decoding on the bundled model through the Scheduler (mask and advance on the GPU, inside the
 * lagged multi-step decode loop). Token bytes: every normal token's bytes equal its decoded text, and
 * every byte value has a single-byte token; SentencePiece-style decoders map as decoding in context does.
 * Generations under hand-built automata, greedy and sampled, decode to text the automaton accepts and end
 * by EOS or at an accepting state, also with max_tokens at or just above dist[0]; unconstrained requests
 * beside a constrained one keep their solo ids, and so does the constrained one; 16 steps per submit and 1
 * give the same constrained ids; a constrained step is the plain one plus exactly the mask and the advance.
 * Requests the engine cannot serve are ValidationErrors.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { ValidationError } from "../../src/errors.ts";
import { type ByteDfa, DEAD } from "../../src/grammar/dfa.ts";
import { bytesOf, singleByteTokens, tokenBytes } from "../../src/grammar/token_bytes.ts";
import { Tokenizer } from "../../src/loader/tokenizer.ts";
import { makeDfa } from "../../src/lab/ref/grammar.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL, FIXTURES } from "../util/fixtures.ts";

/** An automaton for a sequence of literal strings and one-or-more runs of a character class. */
function seqDfa(parts: (string | { plus: string })[]): ByteDfa {
  const enc = new TextEncoder();
  const next = new Uint16Array(64 * 256).fill(DEAD);
  let cur = 0, n = 1;
  for (const p of parts) {
    if (typeof p === "string") {
      for (const b of enc.encode(p)) next[cur * 256 + b] = n, cur = n++;
    } else {
      const loop = n++;
      for (const b of enc.encode(p.plus)) next[cur * 256 + b] = next[loop * 256 + b] = loop;
      cur = loop;
    }
  }
  const accept = new Uint8Array(n);
  accept[cur] = 1;
  return makeDfa(n, next.slice(0, n * 256), accept);
}

/** At least `n` bytes of `cls` (a run of lowercase words: the model keeps writing, many steps). */
function atLeast(cls: string, n: number): ByteDfa {
  const next = new Uint16Array((n + 1) * 256).fill(DEAD);
  for (let s = 0; s <= n; s++) {
    for (const b of new TextEncoder().encode(cls)) next[s * 256 + b] = Math.min(s + 1, n);
  }
  const accept = new Uint8Array(n + 1);
  accept[n] = 1;
  return makeDfa(n + 1, next, accept);
}

/** Lowercase words and spaces, 24 bytes or more: dist[0] = 24. */
const WORDS = atLeast("abcdefghijklmnopqrstuvwxyz ", 24);
/** `{"n": [0-9]+}`: dist[0] = 8 (`{"n": 0}`). */
const NUMBER_OBJECT = seqDfa(['{"n": ', { plus: "0123456789" }, "}"]);
/** `(yes|no)`. */
const YES_NO = (() => {
  const next = new Uint16Array(5 * 256).fill(DEAD);
  const edge = (s: number, c: string, t: number) => (next[s * 256 + c.charCodeAt(0)] = t);
  edge(0, "y", 1), edge(1, "e", 2), edge(2, "s", 3), edge(0, "n", 4), edge(4, "o", 3);
  return makeDfa(5, next, Uint8Array.of(0, 0, 0, 1, 0));
})();

/** The state the automaton reaches on `bytes`, or DEAD. */
function run(dfa: ByteDfa, bytes: Uint8Array): number {
  let s = 0;
  for (const b of bytes) if (s !== DEAD) s = dfa.next[s * 256 + b];
  return s;
}

let engine: Engine;
let tok: Tokenizer;
beforeAll(async () => {
  engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL), { contextWindow: 256, maxBatch: 3 });
  tok = engine.tokenizer!;
});
afterAll(() => engine.destroy());

const prompt = (text: string) => tok.encode(text);
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0 };
const SAMPLED = { temperature: 0.9, topK: 40, topP: 0.95, minP: 0, seed: 77 };

async function generate(reqs: Parameters<Scheduler["submit"]>[0][], stepsPerSubmit = 16) {
  const s = new Scheduler(engine, { stepsPerSubmit });
  try {
    return await Promise.all(reqs.map((r) => s.submit(r).result));
  } finally {
    await s.close();
  }
}

/** Asserts the ids decode to bytes the automaton accepts, ending by EOS or by the length limit. */
function expectAccepted(dfa: ByteDfa, r: Awaited<ReturnType<typeof generate>>[number], maxTokens: number) {
  const bytes = new TextEncoder().encode(tok.decode(r.tokenIds));
  const end = run(dfa, bytes);
  const what = `${JSON.stringify(r.text)} (${r.finishReason}, ${r.completionTokens} tokens)`;
  expect(end, what).not.toBe(DEAD);
  expect(dfa.accept[end], what).toBe(1);
  expect(r.text).toBe(tok.decode(r.tokenIds));
  if (r.finishReason === "length") expect(r.completionTokens, what).toBe(maxTokens);
  else expect(r.finishReason, what).toBe("stop");
}

describe("token bytes", () => {
  test("bundled model: each normal token's bytes are its decoded text; every byte value is a token", () => {
    const tb = tokenBytes(tok.json, engine.config.dims.vocab);
    const text = new TextDecoder();
    let checked = 0;
    for (let id = 0; id < tb.vocab; id++) {
      if (tok.specialIds.has(id)) {
        expect(bytesOf(tb, id).length).toBe(0);
        continue;
      }
      const b = bytesOf(tb, id);
      expect(b.length, `token ${id}`).toBeGreaterThan(0);
      // Partial UTF-8 decodes to U+FFFD on both sides.
      if (text.decode(b) !== tok.decode([id], false)) {
        expect.fail(`token ${id}: ${b} vs ${tok.decode([id], false)}`);
      }
      checked++;
    }
    expect(checked).toBe(tb.vocab - tok.specialIds.size);
    expect([...singleByteTokens(tb)].filter((t) => t < 0)).toEqual([]);
  });

  test("SentencePiece-style decoders: ▁ a space, <0xXX> the raw byte, added tokens their text", async () => {
    const vocab: Record<string, number> = { "<unk>": 0, "<s>": 1, "</s>": 2 };
    for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + b;
    Object.assign(vocab, { "\u2581": 259, "\u2581a": 260, "b": 261, "\u2581hello": 262, "\u00e9": 263 });
    const special = (id: number, content: string) => ({
      id,
      content,
      special: true,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
    });
    const added = [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>"), {
      ...special(264, "<tool>"),
      special: false,
    }];
    const model = {
      type: "BPE",
      vocab,
      merges: [],
      byte_fallback: true,
      unk_token: "<unk>",
      fuse_unk: true,
      dropout: null,
    };
    const llama = {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: "\u2581" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
      ],
    };
    const metaspace = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true };
    for (const decoder of [llama, metaspace]) {
      const dir = await Deno.makeTempDir();
      const json = {
        version: "1.0",
        truncation: null,
        padding: null,
        added_tokens: added,
        normalizer: null,
        pre_tokenizer: null,
        post_processor: null,
        decoder,
        model,
      };
      await Deno.writeTextFile(`${dir}/tokenizer.json`, JSON.stringify(json));
      await Deno.writeTextFile(
        `${dir}/tokenizer_config.json`,
        JSON.stringify({ clean_up_tokenization_spaces: false }),
      );
      const t = await Tokenizer.load(new DiskModelSource(dir));
      const tb = tokenBytes(t.json, 300);
      const str = (id: number) => new TextDecoder().decode(bytesOf(tb, id));
      expect([str(260), str(261), str(262), str(263), str(264)]).toEqual([
        " a",
        "b",
        " hello",
        "é",
        "<tool>",
      ]);
      for (const id of [0, 1, 2, 265, 299]) expect(bytesOf(tb, id).length, `id ${id}`).toBe(0);
      // Mid-text, each token adds exactly its bytes to the decoded text (after "▁hello").
      for (const id of [260, 261, 263, 264, 3 + 0x41]) {
        if (decoder === metaspace && id === 3 + 0x41) continue; // no ByteFallback: "<0x41>" is literal text
        expect(t.decode([262, id], false), `id ${id}`).toBe(t.decode([262], false) + str(id));
      }
      if (decoder === llama) {
        expect([...bytesOf(tb, 3 + 0xe9)]).toEqual([0xe9]);
        expect([...singleByteTokens(tb)].filter((x) => x < 0)).toEqual([]);
      } else expect(str(3 + 0x41)).toBe("<0x41>");
      await Deno.remove(dir, { recursive: true });
    }
  });
});

describe("constrained generation on the bundled model", () => {
  test("greedy and sampled output is accepted text, ending by EOS or in an accepting state", async () => {
    const reqs = [
      { prompt: prompt("config = "), maxTokens: 24, grammar: NUMBER_OBJECT, sampling: GREEDY },
      {
        prompt: prompt("def main():\n    return "),
        maxTokens: 24,
        grammar: NUMBER_OBJECT,
        sampling: SAMPLED,
      },
      { prompt: prompt("# Answer: "), maxTokens: 6, grammar: YES_NO, sampling: SAMPLED },
      { prompt: prompt("# "), maxTokens: 24, grammar: WORDS, sampling: SAMPLED },
    ];
    const out = await generate(reqs);
    out.forEach((r, k) => expectAccepted(reqs[k].grammar, r, reqs[k].maxTokens));
    // The unconstrained model says something else (so the mask did the work).
    const [free] = await generate([{ prompt: reqs[0].prompt, maxTokens: 8 }]);
    expect(free.text.startsWith('{"n": ')).toBe(false);
  });

  test("max_tokens at or barely above dist[0] still ends accepted", async () => {
    expect(NUMBER_OBJECT.dist[0]).toBe(8);
    for (const maxTokens of [8, 9]) {
      for (const sampling of [GREEDY, SAMPLED]) {
        const [r] = await generate([{ prompt: prompt("x = "), maxTokens, grammar: NUMBER_OBJECT, sampling }]);
        expectAccepted(NUMBER_OBJECT, r, maxTokens);
      }
    }
  });

  test("batch invariance: requests beside a constrained one keep their solo ids, as it does", async () => {
    const c = { prompt: prompt("# "), maxTokens: 24, grammar: WORDS, sampling: SAMPLED };
    const a = { prompt: prompt("def add(a, b):\n"), maxTokens: 16 };
    const b = { prompt: prompt("import numpy as np\n"), maxTokens: 16 };
    // Solo runs and the batch both put `c` in slot 0 (sampling draws depend on the slot).
    const [sc] = await generate([c]);
    const [sa] = await generate([a]);
    const [sb] = await generate([b]);
    const [bc, ba, bb] = await generate([c, a, b]);
    expect(ba.tokenIds).toEqual(sa.tokenIds);
    expect(bb.tokenIds).toEqual(sb.tokenIds);
    expect(bc.tokenIds).toEqual(sc.tokenIds);
    expectAccepted(WORDS, bc, c.maxTokens);
    expect(sa.completionTokens).toBeGreaterThan(4);
  });

  test("16 lagged steps per submit and one step at a time give the same constrained ids", async () => {
    // 24 tokens: two lagged groups of 16 steps, the automaton carried across them on the GPU.
    for (const sampling of [GREEDY, SAMPLED]) {
      const r = { prompt: prompt("# "), maxTokens: 24, grammar: WORDS, sampling };
      const [many] = await generate([r], 16);
      const [one] = await generate([r], 1);
      expect(many.tokenIds).toEqual(one.tokenIds);
      expectAccepted(WORDS, one, r.maxTokens);
      expect(one.completionTokens).toBeGreaterThan(16);
    }
  });

  test("a grammar step is the plain step plus the mask before sampling and the advance after", async () => {
    // Kernel names without their variant suffixes (defines, overrides).
    const names = async (grammar: boolean) => {
      const plan = await engine.plan({
        decode: 2,
        segments: [],
        logits: "sampled",
        ...(grammar ? { grammar } : {}),
      });
      return plan.list.map((d) => d.kernel.label.split("_").filter((w) => !/^[A-Z0-9=]+$/.test(w)).join("_"));
    };
    const plain = await names(false), constrained = await names(true);
    expect(plain.some((l) => l.startsWith("grammar"))).toBe(false);
    expect(plain.at(-1)).toBe("sample");
    expect(constrained).toEqual([...plain.slice(0, -1), "grammar_mask", "sample", "grammar_advance"]);
  });

  test("requests the engine cannot constrain are ValidationErrors", async () => {
    const s = new Scheduler(engine);
    const big = seqDfa(["x".repeat(40)]);
    const tooBig = {
      ...big,
      states: 5000,
      next: new Uint16Array(5000 * 256).fill(DEAD),
      dist: new Uint32Array(5000),
      accept: new Uint8Array(5000),
    };
    expect(() => s.submit({ prompt: prompt("x"), maxTokens: 4, grammar: tooBig })).toThrow(
      /5000 states; .* at most 4096/,
    );
    const wrongDist = { ...YES_NO, dist: Uint32Array.of(2, 2, 1, 0, 2) };
    expect(() => s.submit({ prompt: prompt("x"), maxTokens: 4, grammar: wrongDist })).toThrow(
      ValidationError,
    );
    await s.close();
    const bare = await Engine.load(new DiskModelSource(`${FIXTURES}/qwen3`), {
      contextWindow: 64,
      maxBatch: 1,
      kvBudget: 16 << 20,
      warmup: false,
    });
    try {
      const sb = new Scheduler(bare);
      expect(() => sb.submit({ prompt: [5, 6], maxTokens: 4, grammar: YES_NO })).toThrow(/no tokenizer/);
      await sb.close();
    } finally {
      bare.destroy();
    }
  });
});
