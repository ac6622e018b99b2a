/**
 * How far a prompt's prefill chunk has probably got, between the scheduler's per-chunk reports: from the
 * prefill rate seen so far (real reports only), or, before any is known, a curve that keeps moving without
 * claiming a speed. Estimates stop short of the chunk's end: only a real report reaches it. Shared by the
 * server's /events (server/progress.ts) and the playground's local mode (web/prefill_estimate.ts).
 * @module
 */

/** Before any rate is known: the estimate's time constant. */
const UNKNOWN_RATE_MS = 2000;
/** Share of a chunk an estimate may claim; the rest waits for the real report. */
const CAP = 0.95;

/** The rate (tokens per ms) smoothed with a new real report of `tokens` read in `ms`. */
export function smoothRate(rate: number, tokens: number, ms: number): number {
  if (tokens <= 0 || ms <= 0) return rate;
  const r = tokens / ms;
  return rate ? 0.5 * rate + 0.5 * r : r;
}

/**
 * Tokens probably read, `ms` after a real report of `processed` of `total`, with chunks of `chunk` rows and
 * `rate` tokens per ms (0: unknown). Never the chunk's end; `processed` itself when the prompt is done.
 */
export function estimatePrefill(
  processed: number,
  total: number,
  chunk: number,
  rate: number,
  ms: number,
): number {
  const end = Math.min(processed + chunk, total);
  const span = end - processed;
  if (span <= 0) return processed;
  const share = rate ? Math.min(CAP, (ms * rate) / span) : CAP * (1 - Math.exp(-ms / UNKNOWN_RATE_MS));
  return Math.min(end - 1, processed + Math.floor(share * span));
}
