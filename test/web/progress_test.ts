/**
 * The playground's prompt-progress logic without a browser: the local estimator between the scheduler's
 * per-chunk reports (monotonic, short of the chunk's end, learns the rate), and the client-side filter of
 * `/events` (a server that ignores `?id=` sends every request's events).
 */
import { beforeEach, describe, expect, test } from "vitest";
import { PrefillEstimator, resetPrefillRate } from "../../web/prefill_estimate.ts";
import { prefillUpdate, sseData } from "../../web/remote.ts";

type Report = [processed: number, total: number, estimated: boolean];

describe("PrefillEstimator", () => {
  beforeEach(() => resetPrefillRate());

  test("before any rate is known it moves, never backwards, and stops short of the chunk's end", () => {
    const seen: Report[] = [];
    const e = new PrefillEstimator(1000, 2048, (...r) => seen.push(r), 0);
    const values = [100, 500, 2000, 10_000, 1e7].map((t) => e.tick(t));
    expect(values[0]).toBeGreaterThan(0);
    for (let i = 1; i < values.length; i++) expect(values[i]).toBeGreaterThanOrEqual(values[i - 1]);
    expect(values.at(-1)).toBeLessThan(1000);
    expect(seen.every(([p, t, est]) => est && p < t)).toBe(true);
    e.real(1000, 1e7 + 1);
    expect(seen.at(-1)).toEqual([1000, 1000, false]);
  });

  test("a real report sets the rate; later estimates follow it within the next chunk only", () => {
    const seen: Report[] = [];
    const e = new PrefillEstimator(5000, 2048, (...r) => seen.push(r), 0);
    e.real(2048, 1000); // 2.048 tokens per ms
    expect(e.tick(1500)).toBe(2048 + 1024);
    expect(e.tick(1400)).toBe(2048 + 1024); // an earlier clock cannot take it back
    expect(e.tick(10_000)).toBe(2048 + Math.floor(0.95 * 2048));
    // A new request in the same tab starts from the learnt rate.
    const next = new PrefillEstimator(1000, 2048, () => {}, 0);
    expect(next.tick(100)).toBe(204);
  });
});

describe("the /events feed", () => {
  test("keeps the request's prefill events only", () => {
    expect(prefillUpdate('{"type":"prefill","id":7,"processed":10,"total":50,"estimated":true}', 7))
      .toEqual({ processed: 10, total: 50, estimated: true });
    expect(prefillUpdate('{"type":"prefill","id":7,"processed":50,"total":50}', 7))
      .toEqual({ processed: 50, total: 50, estimated: false });
    expect(prefillUpdate('{"type":"prefill","id":8,"processed":10,"total":50}', 7)).toBe(null);
    expect(prefillUpdate('{"type":"ready","model":"m"}', 7)).toBe(null);
    expect(prefillUpdate("not json", 7)).toBe(null);
  });

  test("reads SSE data across chunk boundaries and CRLF", async () => {
    const parts = ["data: a\n\nda", "ta: b\r\n\r\n: keep-alive\n\ndata: c\n", "data: d\n\n"];
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(new TextEncoder().encode(p));
        c.close();
      },
    });
    const out: string[] = [];
    for await (const d of sseData(body)) out.push(d);
    expect(out).toEqual(["a", "b", "c\nd"]);
  });
});
