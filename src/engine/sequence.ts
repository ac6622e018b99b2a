/**
 * One request inside the Scheduler (scheduler.ts): its sequence state (slot, pages, positions, phase, the
 * ids and text so far) and what a group's read-back does to it: `take` checks the new token ids for EOS,
 * stop strings and max tokens and streams them; `flush` and `result` end it.
 * @module
 */
import type { StreamDecoder } from "../loader/tokenizer.ts";
import type { FinishReason, GenerateRequest, Generation, GenerationResult } from "./generation.ts";
import { StopMatcher } from "./stop.ts";

export class Seq {
  slot = -1;
  pages: number[] = [];
  limit = 0; // last position a generated token may take
  prefilled = 0;
  /** The prefix cache was consulted (before the first prefill chunk). */
  looked = false;
  /** Its prefill has its first pages (the "cached" event went out). */
  begun = false;
  /** Prompt tokens whose KV came from the prefix cache. */
  cached = 0;
  encPos = -1; // slot.pos once all submitted work has run (CPU prediction, an upper bound)
  readPos = -1; // last position whose token has been processed
  phase: "queued" | "prefill" | "decode" | "finished" = "queued";
  ids: number[] = [];
  text = "";
  sampled = 0;
  decoder: StreamDecoder | null = null;
  stopper: StopMatcher;
  stopSeq: string | null = null;
  tStart = performance.now();
  tFirst = 0;
  tLast = 0;
  constructor(readonly id: number, readonly req: GenerateRequest, readonly gen: Generation) {
    this.stopper = new StopMatcher(req.stop ?? []);
  }

  /**
   * Takes the token ids read back for positions `start`.. (`words`, one per position) up to `gpuPos`, the
   * slot's position on the GPU, skipping positions already read; streams the new ids and text. Returns why
   * the sequence ends there (EOS or a stop string: "stop"; max tokens: "length"), or null.
   */
  take(
    words: Uint32Array,
    start: number,
    gpuPos: number,
    eosIds: number[],
    now: number,
  ): FinishReason | null {
    const out: number[] = [];
    let text = "";
    let reason: FinishReason | null = null;
    for (let p = start; p < start + words.length && p <= gpuPos; p++) {
      if (p <= this.readPos) continue;
      this.readPos = p;
      const tok = words[p - start];
      this.sampled++;
      if (!this.tFirst) this.tFirst = now;
      this.tLast = now;
      if (eosIds.includes(tok)) {
        reason = "stop";
        break;
      }
      this.ids.push(tok);
      out.push(tok);
      const piece = this.decoder ? this.decoder.push(tok) : "";
      const st = this.stopper.push(piece);
      text += st.emit;
      if (st.stopped !== null) {
        reason = "stop";
        this.stopSeq = st.stopped;
        break;
      }
      if (this.sampled >= this.req.maxTokens) {
        reason = "length";
        break;
      }
    }
    if (out.length || text) {
      this.text += text;
      this.gen.push({ ids: out, text });
    }
    return reason;
  }

  /** On finishing with `reason`: streams the text still held back, unless cancelled or failed. */
  flush(reason: FinishReason): void {
    if (reason !== "stop" || !this.stopSeq) {
      // Release text held back for a possible stop string or an incomplete character.
      const tail = (this.decoder ? this.stopper.push(this.decoder.flush()).emit : "") + this.stopper.flush();
      if (tail && reason !== "cancelled" && reason !== "error") {
        this.text += tail;
        this.gen.push({ ids: [], text: tail });
      }
    }
  }

  /** The request's result, ending with `reason` (timings up to its last token, or now). */
  result(reason: FinishReason, error?: Error): GenerationResult {
    const end = this.tLast || performance.now();
    const ttft = this.tFirst ? this.tFirst - this.tStart : 0;
    return {
      tokenIds: this.ids,
      text: this.text,
      finishReason: reason,
      stopSequence: this.stopSeq,
      promptTokens: this.req.prompt.length,
      cachedTokens: this.cached,
      completionTokens: this.sampled,
      ttftMs: ttft,
      prefillTps: ttft ? (this.req.prompt.length - this.cached) / (ttft / 1000) : 0,
      decodeTps: this.sampled > 1 && end > this.tFirst
        ? (this.sampled - 1) / ((end - this.tFirst) / 1000)
        : 0,
      totalMs: end - this.tStart,
      error,
    };
  }
}
