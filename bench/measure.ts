/**
 * End-to-end figures through the real path: `Engine.load`, then requests through `Scheduler` (the lagged
 * multi-step decode loop), timed with the scheduler's own clocks. Load (weights + buffers), first-run
 * pipeline compilation (`engine.warmup()`), prefill (TTFT) and steady decode are reported apart.
 * @module
 */
import { Engine } from "../src/engine/engine.ts";
import type { KvCacheType } from "../src/engine/kv_pool.ts";
import type { ProfileOverrides } from "../src/gpu/profile.ts";
import { Scheduler, type SchedulerEvent } from "../src/engine/scheduler.ts";
import { ValidationError } from "../src/errors.ts";
import { SyntheticModelSource, syntheticShape } from "../src/loader/synthetic.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../src/platform/deno.ts";
import type { WebGpuChoice } from "../src/platform/mod.ts";
import { median } from "./timer.ts";

export interface ModelSpec {
  /** A synthetic shape name, or a model folder. */
  synthetic?: string;
  dir?: string;
}

/** The models of `--synthetic A,B --model DIR,default`, labelled; a typo in a shape name fails here. */
export function modelSpecs(synthetic?: string, model?: string): (ModelSpec & { label: string })[] {
  const specs: (ModelSpec & { label: string })[] = [];
  for (const s of (synthetic ?? "").split(",").filter(Boolean)) {
    syntheticShape(s);
    specs.push({ synthetic: s, label: s });
  }
  for (const d of (model ?? "").split(",").filter(Boolean)) {
    const dir = d === "default" ? DEFAULT_MODEL_DIR : d;
    specs.push({ dir, label: dir.split("/").filter(Boolean).pop()! });
  }
  if (!specs.length) {
    throw new ValidationError("give --synthetic NAME or --model DIR (see --help)", "synthetic");
  }
  return specs;
}

export interface LoadOptions {
  contextWindow: number;
  /** Sequences decoded together (default 1). */
  maxBatch?: number;
  prefillChunk?: number;
  f32?: boolean;
  webgpu?: WebGpuChoice;
  /** Dawn instance flags (e.g. `backend=null`: experiments without a GPU). */
  dawnFlags?: string[];
  seed?: number;
  /** KV cache element type (default the engine's, act). */
  kvCache?: KvCacheType;
  /** Kernel profile changes (src/gpu/profile.ts). */
  profile?: ProfileOverrides;
  /** Rows whose logits a step can return (`Engine.forwardLogits` scores this many at a time). */
  logitRows?: number;
}

export interface Loaded {
  engine: Engine;
  /** Device, config, tokenizer, weights (filled or read) and buffers, until the GPU has finished. */
  loadMs: number;
  /** `engine.warmup()`: every step kernel compiled, two plans built. */
  compileMs: number;
}

export async function loadModel(spec: ModelSpec, o: LoadOptions): Promise<Loaded> {
  const t0 = performance.now();
  const opts = {
    maxBatch: o.maxBatch ?? 1,
    contextWindow: o.contextWindow,
    prefillChunk: o.prefillChunk,
    gpuOptions: { f16: !o.f32, profile: o.profile, webgpu: o.webgpu, dawnFlags: o.dawnFlags },
    kvCache: o.kvCache,
    logitRows: o.logitRows,
    warmup: false,
  };
  let engine: Engine;
  if (spec.synthetic) {
    const src = new SyntheticModelSource(spec.synthetic, new DiskModelSource(DEFAULT_MODEL_DIR));
    engine = await Engine.load(src, { ...opts, weightSource: src.weightSource({ seed: o.seed ?? 1 }) });
  } else {
    engine = await Engine.load(new DiskModelSource(spec.dir!), opts);
    disableEos(engine);
  }
  await engine.gpu.device.queue.onSubmittedWorkDone();
  const t1 = performance.now();
  await engine.warmup();
  await engine.gpu.device.queue.onSubmittedWorkDone();
  return { engine, loadMs: t1 - t0, compileMs: performance.now() - t1 };
}

/**
 * A benchmark runs its full token count (llama-bench does the same): EOS is taken out of the CPU list and
 * of the GPU's (sample.wgsl stops a slot on the ids in `slots.eos`: count, then ids).
 */
function disableEos(engine: Engine): void {
  engine.eosIds.length = 0;
  engine.gpu.device.queue.writeBuffer(engine.slots.eos, 0, new Uint32Array([0]));
}

export interface E2EOptions {
  prompts: number[];
  depths: number[];
  decodeTokens: number;
  runs: number;
  warmup: number;
  stepsPerSubmit?: number;
  /**
   * Scheduler option: a prefill on an idle GPU submits its first layers before encoding the rest (default
   * on).
   */
  headStart?: boolean;
  seed: number;
  /** Warm-up runs repeat the measured requests; by default they are cut to the same step layouts. */
  fullWarmup?: boolean;
  /** Progress lines on stderr. */
  log?: (s: string) => void;
}

export interface Figure {
  /** Median over the measured runs. */
  value: number;
  runs: number[];
}

export interface E2EResult {
  prefill: { tokens: number; tps: Figure; ttftMs: Figure }[];
  decode: { depth: number; tokens: number; tps: Figure }[];
  /** Prefill rate of the last chunks of a long prompt: positions [from, to) at depth ≈ `depth`. */
  prefillAtDepth: { depth: number; from: number; to: number; tps: Figure }[];
  /**
   * TTFT of the warm-up requests (first plan builds of chunk layouts land here), by measured prompt length.
   */
  warmupTtftMs: Record<number, number[]>;
  stepsPerSubmit: number;
  prefillChunk: number;
}

interface Req {
  len: number;
  prefill: boolean;
  depth: number | null;
}

/** Random prompt ids in [1, vocab): never zeros (a row of zero ids hides nothing, but is not a prompt). */
export function randomIds(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0 || 1;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13, s >>>= 0, s ^= s >>> 17, s ^= s << 5, s >>>= 0; // xorshift32
    out[i] = 1 + (s % (vocab - 1));
  }
  return out;
}

/**
 * One request per distinct prompt length: a length listed in `prompts` gives TTFT/prefill; a depth d gives
 * decode (d tokens of prompt, then decodeTokens + 1 new tokens, the first excluded from the rate). A 16k
 * prompt serves both. Runs are interleaved (every length once per run) and each run has fresh random ids.
 */
export async function measureE2E(engine: Engine, o: E2EOptions): Promise<E2EResult> {
  const reqs = new Map<number, Req>();
  for (const n of o.prompts) reqs.set(n, { len: n, prefill: true, depth: reqs.get(n)?.depth ?? null });
  for (const d of o.depths) {
    const len = Math.max(1, d);
    reqs.set(len, { len, prefill: reqs.get(len)?.prefill ?? false, depth: d });
  }
  const order = [...reqs.values()].sort((a, b) => a.len - b.len);
  const sched = new Scheduler(engine, { stepsPerSubmit: o.stepsPerSubmit, headStart: o.headStart });
  const events = new Map<number, { processed: number; total: number; t: number }[]>();
  sched.listeners.add((e: SchedulerEvent) => {
    if (e.type === "prefill") {
      events.get(e.id)?.push({ processed: e.processed, total: e.total, t: performance.now() });
    }
  });
  const V = engine.config.dims.vocab;
  const ttft = new Map<number, number[]>();
  const ptps = new Map<number, number[]>();
  const dtps = new Map<number, number[]>();
  const atDepth = new Map<number, { from: number; to: number; tps: number[] }>();
  const warmupTtftMs: Record<number, number[]> = {};
  const push = <K>(m: Map<K, number[]>, k: K, v: number) => m.set(k, [...(m.get(k) ?? []), v]);
  try {
    for (let run = 0; run < o.warmup + o.runs; run++) {
      const measured = run >= o.warmup;
      for (const r of order) {
        let len = r.len;
        let maxTokens = r.depth !== null ? o.decodeTokens + 1 : 1;
        if (!measured && !o.fullWarmup) {
          // Same step layouts (a full chunk, the same final chunk, a decode group), without the long prefill.
          const C = engine.soloPrefillChunk;
          if (len > C) len = C + ((len - 1) % C) + 1;
          maxTokens = Math.min(maxTokens, 3);
        }
        o.log?.(
          `  ${measured ? "run" : "warm-up"} ${run + 1}/${
            o.warmup + o.runs
          }: prompt ${len}, ${maxTokens} new`,
        );
        const gen = sched.submit({
          prompt: randomIds(len, V, o.seed * 1000003 + run * 7919 + r.len),
          maxTokens,
        });
        events.set(gen.id, []);
        const res = await gen.result;
        if (res.error) throw res.error;
        const ev = events.get(gen.id)!;
        events.delete(gen.id);
        if (!measured) {
          (warmupTtftMs[r.len] ??= []).push(res.ttftMs);
          continue;
        }
        if (r.prefill) {
          push(ttft, r.len, res.ttftMs);
          push(ptps, r.len, res.prefillTps);
        }
        if (r.depth !== null) {
          if (res.completionTokens !== maxTokens) {
            throw new Error(
              `depth ${r.depth}: ${res.completionTokens} of ${maxTokens} tokens (${res.finishReason})`,
            );
          }
          push(dtps, r.depth, res.decodeTps);
        }
        const chunk = chunkRate(ev);
        if (chunk) {
          const a = atDepth.get(r.len) ?? { from: chunk.from, to: chunk.to, tps: [] };
          a.tps.push(chunk.tps);
          atDepth.set(r.len, a);
        }
      }
    }
  } finally {
    await sched.close();
  }
  const fig = (xs: number[]): Figure => ({ value: median(xs), runs: xs });
  return {
    prefill: o.prompts.map((n) => ({
      tokens: n,
      tps: fig(ptps.get(n) ?? []),
      ttftMs: fig(ttft.get(n) ?? []),
    })),
    decode: o.depths.map((d) => ({ depth: d, tokens: o.decodeTokens, tps: fig(dtps.get(d) ?? []) })),
    prefillAtDepth: [...atDepth.entries()].map(([depth, a]) => ({
      depth,
      from: a.from,
      to: a.to,
      tps: fig(a.tps),
    })),
    warmupTtftMs,
    stepsPerSubmit: sched.stepsPerSubmit,
    prefillChunk: engine.soloPrefillChunk,
  };
}

/** Where the prefill-at-depth window starts: llama.cpp's pp512 at depth 16,384 is the figure beside it. */
const PREFILL_DEPTH = 16384;

/**
 * Tokens/s over ≥ 2048 tokens of chunks from depth PREFILL_DEPTH on (else the deepest such window before
 * the final chunk). Each prefill chunk is one group, retired one group late: chunk k's event fires once
 * chunk k+1 has run, so the gap between two events is the GPU time of as many chunks as lie between them.
 * The last non-final event is left out (the chunk after it is the final one, which may be short and is read
 * at once for the first token).
 */
export function chunkRate(
  ev: { processed: number; total: number; t: number }[],
): { from: number; to: number; tps: number } | null {
  const mid = ev.filter((e) => e.processed < e.total);
  if (mid.length < 3) return null;
  const chunk = mid[1].processed - mid[0].processed;
  const last = mid.length - 2;
  const span = (ai: number) => {
    let bi = ai + 1;
    while (bi < last && mid[bi].processed - mid[ai].processed < 2048) bi++;
    return bi;
  };
  let ai = mid.findIndex((e) => e.processed + chunk >= PREFILL_DEPTH);
  if (ai < 0 || ai >= last || mid[span(ai)].processed - mid[ai].processed < 2048) {
    ai = last - 1;
    while (ai > 0 && mid[ai].processed > mid[last].processed - 2048) ai--;
  }
  const a = mid[ai];
  const b = mid[span(ai)];
  if (b.t <= a.t) return null;
  return {
    from: a.processed + chunk,
    to: b.processed + chunk,
    tps: (b.processed - a.processed) / ((b.t - a.t) / 1000),
  };
}
