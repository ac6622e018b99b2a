/**
 * frequency_penalty / presence_penalty on the GPU sampler, against a CPU reference: the logits of the whole
 * sequence (one forward pass), penalised over the last 64 tokens of the sequence so far (prompt included,
 * as llama.cpp's penalty_last_n), must give each greedy token the scheduler produced.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { GREEDY } from "../../src/engine/slots.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";

const WINDOW = 64;
// A tie within this margin (f16 activations, tiled vs vector matmul) may go either way.
const NEAR_TIE = 0.05;

let engine: Engine;
beforeAll(async () => {
  engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL), {
    contextWindow: 256,
    maxBatch: 2,
    logitRows: 128,
  });
});
afterAll(() => engine?.destroy());

function penalise(row: Float32Array, seq: number[], freq: number, pres: number): Float64Array {
  const out = Float64Array.from(row);
  const counts = new Map<number, number>();
  for (const t of seq.slice(-WINDOW)) counts.set(t, (counts.get(t) ?? 0) + 1);
  for (const [t, c] of counts) out[t] -= c * freq + pres;
  return out;
}

function top2(row: ArrayLike<number>): { ids: number[]; gap: number } {
  let a = 0, b = -1;
  for (let i = 1; i < row.length; i++) {
    if (row[i] > row[a]) (b = a), (a = i);
    else if (b < 0 || row[i] > row[b]) b = i;
  }
  return { ids: [a, b], gap: row[a] - row[b] };
}

describe("frequency and presence penalties", () => {
  test("greedy tokens match the CPU-penalised argmax, and the penalty changes the output", async () => {
    const tok = engine.tokenizer!;
    const prompt = tok.encode(
      tok.applyChatTemplate([{ role: "user", content: "Write a python class for a bank account." }]),
    );
    const freq = 1.2, pres = 0.6;
    const sched = new Scheduler(engine);
    const plain = await sched.submit({ prompt, maxTokens: 24, sampling: GREEDY }).result;
    const pen = await sched.submit({
      prompt,
      maxTokens: 24,
      sampling: { ...GREEDY, frequencyPenalty: freq, presencePenalty: pres },
    }).result;
    await sched.close();
    expect(pen.tokenIds.length, JSON.stringify({ ...pen, error: pen.error?.message, plain: plain.text }))
      .toBeGreaterThan(4);
    expect(pen.tokenIds).not.toEqual(plain.tokenIds);

    const seq = [...prompt, ...pen.tokenIds];
    const V = engine.config.dims.vocab;
    const logits = await engine.forwardLogits(seq.slice(0, seq.length - 1));
    let changed = 0;
    for (let i = 0; i < pen.tokenIds.length; i++) {
      const pos = prompt.length - 1 + i; // the row that predicts generated token i
      const raw = logits.subarray(pos * V, (pos + 1) * V);
      const ref = penalise(raw, seq.slice(0, pos + 1), freq, pres);
      const want = top2(ref);
      if (top2(raw).ids[0] !== want.ids[0]) changed++;
      if (pen.tokenIds[i] !== want.ids[0]) {
        expect(want.gap, `step ${i}: got ${pen.tokenIds[i]}, reference ${want.ids[0]}`).toBeLessThan(
          NEAR_TIE,
        );
        expect(want.ids).toContain(pen.tokenIds[i]);
      }
    }
    expect(changed).toBeGreaterThan(0);
  });
});
