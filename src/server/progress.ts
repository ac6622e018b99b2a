/**
 * The live event feed behind GET /events: the host's scheduler events, plus prefill progress between the
 * scheduler's per-chunk events (a prompt read in one 2048-row chunk would otherwise show nothing until its
 * first token), estimated by engine/prefill_estimate.ts from the rate seen over any request's chunks. The
 * real event then replaces the estimate; estimates never go backwards.
 * @module
 */
import { estimatePrefill, smoothRate } from "../engine/prefill_estimate.ts";
import type { HostEvent, ModelHost } from "./host.ts";

interface Reading {
  total: number;
  /** Prompt tokens known to be done, and when that was learnt. */
  processed: number;
  at: number;
  /** The highest estimate sent. */
  shown: number;
}

export type PrefillEvent = {
  type: "prefill";
  id: number;
  processed: number;
  total: number;
  estimated?: true;
};

/** Estimates are sent this often while someone listens and a prompt is being read. */
const ESTIMATE_MS = 250;

export type FeedEvent = HostEvent | PrefillEvent;

export class ProgressFeed {
  readonly #listeners = new Set<(e: FeedEvent) => void>();
  readonly #reads = new Map<number, Reading>();
  #rate = 0; // tokens per ms, smoothed
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(readonly host: ModelHost) {
    host.listeners.add((e) => {
      this.observe(e);
      this.#send(e);
    });
  }

  /** Adds a listener; returns its removal. */
  listen(fn: (e: FeedEvent) => void): () => void {
    this.#listeners.add(fn);
    this.#timer ??= setInterval(() => this.estimates().forEach((e) => this.#send(e)), ESTIMATE_MS);
    return () => {
      this.#listeners.delete(fn);
      if (!this.#listeners.size) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  #send(e: FeedEvent): void {
    for (const l of this.#listeners) l(e);
  }

  /** Feeds a scheduler event (the host's listener). */
  observe(e: HostEvent, now = performance.now()): void {
    if (e.type === "start") {
      this.#reads.set(e.id, { total: e.promptTokens, processed: 0, at: now, shown: 0 });
    } else if (e.type === "cached") {
      const r = this.#reads.get(e.id);
      if (r) Object.assign(r, { processed: e.tokens, at: now, shown: e.tokens });
    } else if (e.type === "prefill") {
      const r = this.#reads.get(e.id);
      if (r) this.#rate = smoothRate(this.#rate, e.processed - r.processed, now - r.at);
      if (r && e.processed < e.total) {
        Object.assign(r, { processed: e.processed, at: now, shown: e.processed });
      } else this.#reads.delete(e.id);
    } else if (e.type === "finish") {
      this.#reads.delete(e.id);
    }
  }

  /** An estimated event for each prompt whose estimate moved since the last call. */
  estimates(now = performance.now()): PrefillEvent[] {
    const { info, stats } = this.host.served;
    const chunk = stats.running > 1 ? info.prefillChunk : info.soloPrefillChunk;
    const out: PrefillEvent[] = [];
    for (const [id, r] of this.#reads) {
      const processed = estimatePrefill(r.processed, r.total, chunk, this.#rate, now - r.at);
      if (processed > r.shown) {
        r.shown = processed;
        out.push({ type: "prefill", id, processed, total: r.total, estimated: true });
      }
    }
    return out;
  }
}
