/**
 * The one owner of the GPU. Requests become sequences; each loop turn builds a *group*: one prefill chunk
 * (with every decoding sequence riding along as a decode row) or K decode steps for all decoding sequences.
 * A group is one submit followed by a copy of the new token ids into a staging buffer; groups are read back
 * with a lag (see #run), so the GPU never waits for the CPU between tokens. After read-back the
 * CPU detokenizes, finds EOS and stop strings, and discards what the GPU overshot (sequence.ts).
 * @module
 */
import { CapacityError, ContextWindowError, ValidationError } from "../errors.ts";
import { StagingBuffer } from "../gpu/readback.ts";
import type { Engine } from "./engine.ts";
import { GREEDY } from "./slots.ts";
import {
  type FinishReason,
  type GenerateRequest,
  Generation,
  type SchedulerEvent,
  type SchedulerOptions,
} from "./generation.ts";
import { PrefixReuse } from "./prefix.ts";
import type { PrefixCache } from "./prefix_cache.ts";
import type { EvictedPages, PrefixStore } from "./prefix_store.ts";
import { Seq } from "./sequence.ts";
import type { StepLayout } from "./step.ts";

export type {
  FinishReason,
  GenerateRequest,
  GenerationResult,
  SchedulerEvent,
  SchedulerOptions,
  TokenChunk,
} from "./generation.ts";
export { Generation } from "./generation.ts";

interface Group {
  ranges: { seq: Seq; start: number; len: number }[];
  prefill: { seq: Seq; processed: number } | null;
  staging: StagingBuffer;
  bytes: number;
  /** It holds the first generated token of some sequence. */
  firstToken: boolean;
  /** Encoded, not yet submitted. */
  commands: GPUCommandBuffer | null;
  /** The read-back, once mapped. */
  done: Promise<ArrayBuffer> | null;
  /** Unwritten cached pages evicted before this group, copied at its start for the prefix cache's files. */
  evicted: EvictedPages | null;
}

export class Scheduler {
  readonly listeners = new Set<(e: SchedulerEvent) => void>();
  readonly stepsPerSubmit: number;
  readonly headStart: boolean;
  readonly prefix: PrefixReuse;
  #queue: Seq[] = [];
  #active: Seq[] = [];
  #pool: StagingBuffer[] = [];
  #nextId = 1;
  #wake: (() => void) | null = null;
  #loop: Promise<void> | null = null;
  #kicked = false;
  #closed = false;

  constructor(readonly engine: Engine, opts: SchedulerOptions = {}) {
    this.stepsPerSubmit = opts.stepsPerSubmit ?? 16;
    this.headStart = opts.headStart ?? true;
    this.prefix = new PrefixReuse(engine.kv, opts, engine.recurrent, engine.config.hybrid?.window);
  }

  /** The prefix cache (null when off) and its second tier (null without a folder). */
  get prefixCache(): PrefixCache | null {
    return this.prefix.cache;
  }
  get prefixStore(): PrefixStore | null {
    return this.prefix.store;
  }

  /** Sequences waiting for a slot, and running. */
  get queued(): number {
    return this.#queue.length;
  }
  get running(): number {
    return this.#active.length;
  }

  /** Starts a request. Throws ContextWindowError/ValidationError at once when it cannot run. */
  submit(req: GenerateRequest): Generation {
    if (!req.prompt.length) throw new ValidationError("the prompt is empty", "prompt");
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 1) {
      throw new ValidationError("max_tokens must be a positive integer", "max_tokens");
    }
    const ctx = this.engine.contextWindow;
    if (req.prompt.length + req.maxTokens > ctx) {
      throw new ContextWindowError(req.prompt.length, req.maxTokens, ctx);
    }
    const vocab = this.engine.config.dims.vocab;
    if (req.prompt.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab)) {
      throw new ValidationError(`prompt token ids must be integers in [0, ${vocab})`, "prompt");
    }
    if (req.grammar) this.#checkGrammar(req.grammar);
    const id = this.#nextId++;
    const gen = new Generation(id);
    const seq = new Seq(id, req, gen);
    if (this.engine.tokenizer) seq.decoder = this.engine.tokenizer.stream();
    this.#queue.push(seq);
    req.signal?.addEventListener("abort", () => this.#kick(), { once: true });
    this.#emit({ type: "start", id, promptTokens: req.prompt.length });
    this.#kick();
    return gen;
  }

  /** A grammar needs the engine's token bytes, an EOS id to end on, and an automaton that fits a slot. */
  #checkGrammar(dfa: NonNullable<GenerateRequest["grammar"]>): void {
    const g = this.engine.grammar;
    const no = (why: string) => new ValidationError(`this engine cannot constrain output: ${why}`, "grammar");
    if (!g) throw no(this.engine.grammarUnavailable ?? "no grammar tables");
    // At an accepting state the mask may allow only EOS.
    if (!this.engine.eosIds.length) throw no("the model has no EOS id (config eos_token_id)");
    g.validate(dfa);
  }

  /** Stops accepting work once idle. */
  async close(): Promise<void> {
    this.#closed = true;
    this.prefix.close();
    this.#kick();
    await this.#loop;
    for (const s of this.#pool) s.destroy();
  }

  #emit(e: SchedulerEvent): void {
    for (const l of this.listeners) l(e);
  }

  #kick(): void {
    this.#kicked = true;
    if (!this.#loop) {
      this.#loop = this.#run().finally(() => {
        this.#loop = null;
        // A submit between the loop's last check and here found the loop still set: start it again.
        if (this.#queue.length) this.#kick();
        else if (!this.#closed) this.prefix.scheduleSpill(() => !!this.#loop || this.#closed);
      });
    }
    this.#wake?.();
  }

  /**
   * Under Deno, `mapAsync()` blocks the JS thread until the GPU is idle and resolves ~10 ms later. So each
   * turn encodes the next group first, then maps the previous one (the sync point), submits the encoded
   * group at once (a bubble of microseconds), and only then awaits read-backs that are already due.
   */
  async #run(): Promise<void> {
    let prev: Group | null = null; // submitted, not yet mapped
    const mapped: Group[] = []; // mapped, read-back pending
    while (true) {
      try {
        this.#reap();
        this.#admit();
        const next = await this.#build(!prev);
        if (prev) {
          prev.done = prev.staging.read(prev.bytes);
          if (prev.evicted) this.prefixStore!.readEvicted(prev.evicted);
          mapped.push(prev);
          prev = null;
        }
        if (next) {
          this.engine.gpu.device.queue.submit([next.commands!]);
          next.commands = null;
          prev = next;
        }
        // Keep one read-back in flight while the GPU has work; drain everything when it has none. A group
        // carrying a first token is read at once (time to first token), the GPU still busy with `prev`.
        while (mapped.length > (prev ? 1 : 0) || mapped[0]?.firstToken) await this.#retire(mapped.shift()!);
        if (!next && !prev) {
          if (this.#closed || (!this.#queue.length && !this.#active.length)) return;
          // A submit or abort that came in during this turn (while nothing waited) must not be slept through.
          if (!this.#kicked) await new Promise<void>((r) => (this.#wake = r));
          this.#kicked = false;
          this.#wake = null;
        }
      } catch (e) {
        console.error("[flint] scheduler error:", e);
        for (const s of [...this.#active, ...this.#queue]) this.#finish(s, "error", e as Error);
        prev = null;
        mapped.length = 0;
      }
    }
  }

  /** Writes every cached page to the second tier now and waits for the files (tests, `cache-prompt`). */
  flushPrefixCache(): Promise<void> {
    return this.prefix.flush();
  }

  /** Cancelled sequences end now; their in-flight results are ignored. */
  #reap(): void {
    for (const s of [...this.#queue, ...this.#active]) {
      if (s.req.signal?.aborted) this.#finish(s, "cancelled");
    }
  }

  #admit(): void {
    const { slots, kv } = this.engine;
    while (this.#queue.length && slots.free > 0) {
      const s = this.#queue[0];
      const need = kv.pagesFor(s.req.prompt.length + 1);
      if (need > kv.availablePages) {
        if (!this.#active.length) {
          this.#finish(s, "error", new CapacityError("the KV cache cannot hold this prompt"));
        }
        break;
      }
      this.#queue.shift();
      s.slot = slots.acquire()!;
      s.limit = s.req.prompt.length + s.req.maxTokens - 1;
      slots.start(s.slot, s.req.prompt, s.limit, s.req.sampling ?? GREEDY);
      if (s.req.grammar) this.engine.grammar!.start(s.slot, s.req.grammar);
      else this.engine.grammar?.clear(s.slot);
      s.phase = "prefill";
      this.#active.push(s);
    }
  }

  /**
   * Encodes (without submitting) the next group, or returns null when there is nothing to run. With the GPU
   * `idle`, a prefill step's first layers are submitted at once and the rest encoded while they run (time to
   * first token less the encode); with work in flight the encode already overlaps it.
   */
  async #build(idle: boolean): Promise<Group | null> {
    const eng = this.engine;
    let decoding: Seq[];
    let pre: Seq | undefined;
    let steps: number;
    let chunk = 0;
    const next = this.#active.find((s) => s.phase === "prefill");
    if (next && !next.looked) await this.prefix.reuse(next);
    // Pages for everything the group can write (a finished row keeps rewriting its last position ≤ limit);
    // a sequence the pool cannot grow ends with "length" and the group is planned again without it.
    for (;;) {
      decoding = this.#active.filter((s) => s.phase === "decode" && s.encPos < s.limit);
      pre = this.#active.find((s) => s.phase === "prefill");
      if (!pre && !decoding.length) return null;
      steps = pre ? 1 : Math.min(this.stepsPerSubmit, Math.max(...decoding.map((s) => s.limit - s.encPos)));
      // Alone, a prompt takes the big chunks; with decodes in the step, the small ones keep their waits
      // short.
      chunk = pre
        ? this.prefix.chunkEnd(
          pre,
          pre.prefilled,
          pre.prefilled +
            Math.min(
              decoding.length ? eng.prefillChunk : eng.soloPrefillChunk,
              pre.req.prompt.length - pre.prefilled,
            ),
        ) - pre.prefilled
        : 0;
      const short = decoding.find((s) => !this.#grow(s, Math.min(s.encPos + steps, s.limit)));
      if (short) {
        this.#finish(short, "length");
        continue;
      }
      if (pre && !this.#grow(pre, pre.prefilled + chunk)) {
        this.#finish(pre, "error", new CapacityError("KV cache full during prefill"));
        continue;
      }
      break;
    }
    if (pre && !pre.begun) {
      pre.begun = true;
      this.#emit({ type: "cached", id: pre.id, tokens: pre.cached, total: pre.req.prompt.length });
    }
    const D = decoding.length;
    const rows: number[] = [];
    for (const s of decoding) rows.push(0, 0, s.slot, 1);
    let layout: StepLayout;
    if (pre) {
      const final = pre.prefilled + chunk === pre.req.prompt.length;
      layout = { decode: D, segments: [{ row0: D, len: chunk, final }], logits: "sampled" };
      for (let i = 0; i < chunk; i++) {
        rows.push(pre.req.prompt[pre.prefilled + i], pre.prefilled + i, pre.slot, 0);
      }
    } else {
      layout = { decode: D, segments: [], logits: "sampled" };
    }
    // Mask and advance only in steps where a constrained sequence gets logits (plans unchanged otherwise).
    const constrained = decoding.some((s) => s.req.grammar) || (pre?.req.grammar && layout.segments[0].final);
    if (constrained) layout.grammar = true;
    const plan = await eng.plan(layout);
    eng.writeRows(new Uint32Array(rows));

    let enc = eng.gpu.device.createCommandEncoder({ label: "group" });
    // Before anything in this group can write them: pages evicted unwritten since the last group.
    const evicted = this.prefixStore?.captureEvicted(enc) ?? null;
    const decodeLen = D ? Math.max(...decoding.map((s) => s.encPos + 1)) : 0;
    const shortest = D ? Math.min(...decoding.map((s) => s.encPos + 1)) : 0;
    if (pre && idle && this.headStart) {
      const maxKv = Math.max(decodeLen, pre.prefilled + chunk);
      eng.encodeStep(enc, plan, maxKv, shortest, "head");
      eng.gpu.device.queue.submit([enc.finish()]);
      enc = eng.gpu.device.createCommandEncoder({ label: "group" });
      eng.encodeStep(enc, plan, maxKv, shortest, "tail");
    } else {
      for (let i = 0; i < steps; i++) {
        eng.encodeStep(enc, plan, Math.max(decodeLen + i, pre ? pre.prefilled + chunk : 0), shortest + i);
      }
    }
    if (pre) this.prefix.afterChunk(enc, pre, pre.prefilled + chunk);
    const ranges: Group["ranges"] = [];
    for (const s of decoding) {
      const start = s.encPos + 1;
      const len = Math.min(s.encPos + steps, s.limit) - s.encPos;
      ranges.push({ seq: s, start, len });
      s.encPos += len;
    }
    let prefill: Group["prefill"] = null;
    if (pre) {
      pre.prefilled += chunk;
      prefill = { seq: pre, processed: pre.prefilled };
      if (pre.prefilled === pre.req.prompt.length) {
        pre.phase = "decode";
        pre.encPos = pre.prefilled;
        ranges.push({ seq: pre, start: pre.prefilled, len: 1 });
      }
    }
    const slotBytes = eng.slots.count * 16;
    const bytes = slotBytes + ranges.reduce((a, r) => a + r.len * 4, 0);
    const staging = this.#staging(bytes);
    enc.copyBufferToBuffer(eng.slots.slots, 0, staging.buffer, 0, slotBytes);
    let off = slotBytes;
    for (const r of ranges) {
      enc.copyBufferToBuffer(
        eng.slots.hist,
        (r.seq.slot * eng.slots.ctx + r.start) * 4,
        staging.buffer,
        off,
        r.len * 4,
      );
      off += r.len * 4;
    }
    const firstToken = !!pre && pre.phase === "decode";
    return { ranges, prefill, staging, bytes, firstToken, commands: enc.finish(), done: null, evicted };
  }

  /** Grows a sequence's pages to cover position `upto`; false when the pool is exhausted. */
  #grow(s: Seq, upto: number): boolean {
    try {
      this.engine.kv.ensure(s.slot, s.pages, upto);
      return true;
    } catch (e) {
      if (e instanceof CapacityError) return false;
      throw e;
    }
  }

  #staging(bytes: number): StagingBuffer {
    const i = this.#pool.findIndex((s) => s.size >= bytes);
    if (i >= 0) return this.#pool.splice(i, 1)[0];
    return new StagingBuffer(this.engine.gpu, Math.max(bytes, 4096));
  }

  async #retire(g: Group): Promise<void> {
    const data = new Uint32Array(await g.done!);
    this.#pool.push(g.staging);
    if (g.evicted) this.prefixStore!.writeEvicted(g.evicted);
    const now = performance.now();
    if (g.prefill && g.prefill.seq.phase !== "finished") {
      const s = g.prefill.seq;
      this.prefix.written(s, g.prefill.processed);
      this.#emit({ type: "prefill", id: s.id, processed: g.prefill.processed, total: s.req.prompt.length });
    }
    let off = this.engine.slots.count * 4;
    for (const r of g.ranges) {
      const s = r.seq;
      const words = data.subarray(off, off + r.len);
      off += r.len;
      if (s.phase === "finished") continue;
      const reason = s.take(words, r.start, data[s.slot * 4], this.engine.eosIds, now);
      if (reason) this.#finish(s, reason);
    }
  }

  #finish(s: Seq, reason: FinishReason, error?: Error): void {
    if (s.phase === "finished") return;
    s.flush(reason);
    const wasActive = s.phase !== "queued";
    s.phase = "finished";
    this.#queue = this.#queue.filter((x) => x !== s);
    this.#active = this.#active.filter((x) => x !== s);
    this.prefix.forget(s);
    if (wasActive && s.slot >= 0) {
      this.engine.kv.release(s.pages);
      this.engine.slots.release(s.slot);
    }
    const result = s.result(reason, error);
    this.#emit({ type: "finish", id: s.id, reason, completionTokens: s.sampled, ttftMs: result.ttftMs });
    s.gen.close(result);
  }
}
