/**
 * Prompt-reading progress between the scheduler's real reports (local mode). The scheduler reports a prompt
 * once per chunk (up to 2048 rows), so a prompt read in one chunk would show nothing until its first token.
 * While a chunk runs, this ESTIMATES how far it got from the prefill rate seen earlier in this tab (real
 * reports only), or, before any is known, with a curve that keeps moving without claiming a speed. Estimates
 * stop short of the chunk's end and never go backwards; only a real report reaches the total.
 * @module
 */
import { estimatePrefill, smoothRate } from "../src/engine/prefill_estimate.ts";

/** How often an estimate is sent; short prompts finish before the first one, so the bar does not flash. */
export const ESTIMATE_MS = 200;

/** Prefill tokens per millisecond seen in this tab (smoothed over real reports); 0 while unknown. */
let sessionRate = 0;

export class PrefillEstimator {
  /** Tokens known to be read, and when that was learnt. */
  #processed = 0;
  #at: number;
  /** The highest value reported so far (real or estimated). */
  #shown = 0;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly total: number,
    /** Rows per chunk: how far the next real report can be. */
    readonly chunk: number,
    readonly report: (processed: number, total: number, estimated: boolean) => void,
    now = performance.now(),
  ) {
    this.#at = now;
  }

  /** Starts sending estimates every ESTIMATE_MS until `stop`. */
  start(): this {
    this.#timer = setInterval(() => this.tick(), ESTIMATE_MS);
    return this;
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** A real report: learns the rate from it and passes it on. */
  real(processed: number, now = performance.now()): void {
    sessionRate = smoothRate(sessionRate, processed - this.#processed, now - this.#at);
    this.#processed = Math.max(this.#processed, processed);
    this.#at = now;
    this.#shown = Math.max(this.#shown, processed);
    if (processed >= this.total) this.stop();
    this.report(this.#shown, this.total, false);
  }

  /** Sends an estimate if it moved; returns the estimated tokens read (exposed for tests). */
  tick(now = performance.now()): number {
    const estimate = estimatePrefill(this.#processed, this.total, this.chunk, sessionRate, now - this.#at);
    if (estimate > this.#shown) {
      this.#shown = estimate;
      this.report(estimate, this.total, true);
    }
    return this.#shown;
  }
}

/** Forgets the rate learnt so far (tests). */
export function resetPrefillRate(): void {
  sessionRate = 0;
}
