/**
 * The benchmark's prefill-at-depth window (`chunkRate`): ≥ 2048 tokens of chunks from depth 16,384 on,
 * before the final chunk, whatever the chunk size; the deepest such window when the prompt is shorter. Each
 * event fires one chunk late, so the window is the chunks after the first event through the one after the
 * last, and the rate is their tokens over the events' spacing.
 */
import { describe, expect, test } from "vitest";
import { chunkRate } from "../../bench/measure.ts";

/**
 * Prefill events of a `total`-token prompt in `chunk`-row steps, chunk k taking `ms(k)`: chunk k's event
 * fires when chunk k+1 is done (the final chunk's when it is).
 */
function events(total: number, chunk: number, ms: (k: number) => number) {
  const n = Math.ceil(total / chunk);
  const done: number[] = [];
  for (let k = 0; k < n; k++) done.push((done[k - 1] ?? 0) + ms(k));
  return done.map((_, k) => ({
    processed: Math.min((k + 1) * chunk, total),
    total,
    t: done[Math.min(k + 1, n - 1)],
  }));
}

describe("chunkRate", () => {
  test("2048-row chunks of a 24k prompt: 16k–18k, timed by the chunk that ran between the events", () => {
    // Chunk k runs in 100 + k ms; between the events of chunks 6 and 7 runs chunk 8 (16k–18k), 108 ms.
    const r = chunkRate(events(24576, 2048, (k) => 100 + k))!;
    expect([r.from, r.to]).toEqual([16384, 18432]);
    expect(r.tps).toBeCloseTo(2048 / 0.108, 6);
  });

  test("4096-row chunks: 16k–20k of the 24k prompt; a 20k prompt falls back to its deepest window", () => {
    const r = chunkRate(events(24576, 4096, (k) => 300 + 10 * k))!;
    expect([r.from, r.to]).toEqual([16384, 20480]);
    expect(r.tps).toBeCloseTo(4096 / 0.34, 6); // chunk 4, 16k–20k
    const short = chunkRate(events(20480, 4096, (k) => 300 + 10 * k))!;
    expect([short.from, short.to]).toEqual([12288, 16384]);
  });

  test("512-row chunks span four of them; too few events give none", () => {
    const r = chunkRate(events(20480, 512, (k) => 20 + (k % 3)))!;
    expect([r.from, r.to]).toEqual([16384, 18432]);
    expect(chunkRate(events(4096, 2048, () => 100))).toBeNull();
  });
});
