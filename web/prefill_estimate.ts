/**
 * Prompt-reading progress between the scheduler's real reports (local mode). The scheduler reports a prompt
 * once per chunk (up to 2048 rows), so a prompt read in one chunk would show nothing until its first token.
 * While a chunk runs, this ESTIMATES how far it got from the prefill rate seen earlier in this tab (real
 * reports only), or, before any is known, with a curve that keeps moving without claiming a speed. Estimates
 * stop short of the chunk's end and never go backwards; only a real report reaches the total.
 * @module
 */

/** Before any rate is known: the estimate's time constant. */
const UNKNOWN_RATE_MS = 2000;
/** Share of a chunk an estimate may claim; the rest waits for the real report. */
const CAP = 0.95;
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
    if (processed > this.#processed && now > this.#at) {
      const rate = (processed - this.#processed) / (now - this.#at);
      sessionRate = sessionRate ? 0.5 * sessionRate + 0.5 * rate : rate;
    }
    this.#processed = Math.max(this.#processed, processed);
    this.#at = now;
    this.#shown = Math.max(this.#shown, processed);
    if (processed >= this.total) this.stop();
    this.report(this.#shown, this.total, false);
  }

  /** Sends an estimate if it moved; returns the estimated tokens read (exposed for tests). */
  tick(now = performance.now()): number {
    const end = Math.min(this.#processed + this.chunk, this.total);
    const span = end - this.#processed;
    if (span <= 0) return this.#shown;
    const t = now - this.#at;
    const share = sessionRate
      ? Math.min(CAP, (t * sessionRate) / span)
      : CAP * (1 - Math.exp(-t / UNKNOWN_RATE_MS));
    const estimate = Math.min(end - 1, this.#processed + Math.floor(share * span));
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
