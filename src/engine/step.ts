/**
 * One step = one batch of rows: decode rows first (rows 0..D−1, one per sequence), then prefill segments
 * (consecutive positions of one sequence each). `StepGraph` is the op vocabulary architecture files are
 * written in; each op records dispatches for this layout into a `Plan`, built once per layout and reused
 * (bind groups and params made once). Decode rows always take the vector matmul and split-K attention,
 * prefill rows the tiled kernels, so a row's numbers never depend on its batch.
 * @module
 */
import type { Dispatch } from "../gpu/kernel.ts";
import { ParamArena } from "../gpu/kernel.ts";
import { ShapeError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import type { LinearGroup } from "../loader/weights.ts";
import { attentionDecode, attentionPrefill } from "../ops/attention.ts";
import type { OpContext } from "../ops/context.ts";
import { siluMul } from "../ops/elementwise.ts";
import { embed } from "../ops/embed.ts";
import type { Linear } from "../ops/linear.ts";
import { canSwiGLU, matmul, type MatmulArgs } from "../ops/matmul.ts";
import { rmsNorm } from "../ops/norm.ts";
import { rope } from "../ops/rope.ts";
import { grammarAdvance, type GrammarBuffers, grammarMask } from "../ops/grammar.ts";
import { sample, stepBegin } from "../ops/sample.ts";
import type { Activations, Dims } from "./resources.ts";
import { hybridBuffer } from "./step_hybrid.ts";
import type { KvPool } from "./kv_pool.ts";
import type { RecurrentState } from "./recurrent.ts";
import type { HybridDims } from "../models/model.ts";
import type { Slots } from "./slots.ts";

export interface Segment {
  row0: number;
  len: number;
  /** The segment ends its prompt: its last row gets logits and a sampled token. */
  final: boolean;
}

export interface StepLayout {
  decode: number;
  segments: Segment[];
  /**
   * "sampled": logits for decode rows and final-segment ends, then sampling; "all": every row, no sampling.
   */
  logits: "sampled" | "all";
  /**
   * Some row's sequence is constrained: grammar mask before sampling, grammar advance after ("sampled"
   * only). Absent or false: the step is exactly the unconstrained one.
   */
  grammar?: boolean;
}

export function layoutKey(l: StepLayout): string {
  const g = l.grammar ? "|g" : "";
  return `d${l.decode}|${l.segments.map((s) => `${s.len}${s.final ? "f" : ""}`).join(",")}|${l.logits}${g}`;
}

export function layoutRows(l: StepLayout): number {
  return l.decode + l.segments.reduce((a, s) => a + s.len, 0);
}

/** Rows that get logits, in logit-row order. */
export function logitRows(l: StepLayout): number[] {
  if (l.logits === "all") return Array.from({ length: layoutRows(l) }, (_, i) => i);
  const out = Array.from({ length: l.decode }, (_, i) => i);
  for (const s of l.segments) if (s.final) out.push(s.row0 + s.len - 1);
  return out;
}

/** Recorded dispatches for one layout, plus what they own. */
export class Plan {
  constructor(
    readonly layout: StepLayout,
    readonly list: Dispatch[],
    readonly arena: ParamArena,
    readonly lrows: GPUBuffer,
    readonly logitRows: number[],
  ) {}
  destroy(gpu: Gpu): void {
    this.arena.destroy();
    gpu.memory.destroy(this.lrows);
  }
}

export interface StepResources {
  gpu: Gpu;
  dims: Dims;
  acts: Activations;
  kv: KvPool;
  /** Model layer → its KV-pool layer (−1: a recurrent layer). */
  kvIndex: number[];
  recurrent: RecurrentState | null;
  /** The model's non-dense shapes (config.hybrid). */
  hybrid?: HybridDims;
  slots: Slots;
  invFreq: GPUBuffer;
  mscale: number;
  /** Grammar tables (engines whose model has a tokenizer); layouts with `grammar` need them. */
  grammar?: GrammarBuffers | null;
}

/** `prefillNormed`: xn already holds this norm of the prefill rows (prefillNorm ran for the block). */
export interface Normed {
  prefillNormed?: boolean;
  /** Decode rows on int8 x whatever the weight's size (`MatmulArgs.int8AnySize`). */
  int8AnySize?: boolean;
}

/** The gated MLP activation: SwiGLU's silu, or GeGLU's tanh-approximated gelu (Gemma). */
export type GatedAct = "silu" | "gelu_tanh";

/** Activations ops read and write by name; those in F32_OUT are written as f32, the rest as act. */
const DENSE_ACTS = ["xn", "qkv", "q", "attn", "gu", "h"] as const;
const HYBRID_ACTS = ["gate", "mix", "conv", "delta", "router", "shared", "sharedGate"] as const;
export type ActName = (typeof DENSE_ACTS)[number] | (typeof HYBRID_ACTS)[number];
// "mix" is f32: the DeltaNet's decay and gates compound over every later token (bench/NOTES.md #99).
const F32_OUT = new Set<ActName>(["xn", "mix", "router", "shared", "sharedGate"]);

/** The op vocabulary of architecture files, bound to one step layout. */
export class StepGraph {
  readonly ctx: OpContext;
  readonly R: number;
  readonly D: number;
  readonly lrows: number[];

  constructor(readonly res: StepResources, readonly layout: StepLayout) {
    this.ctx = { gpu: res.gpu, arena: new ParamArena(res.gpu), list: [] };
    this.R = layoutRows(layout);
    this.D = layout.decode;
    this.lrows = logitRows(layout);
  }

  /** Decode rows read their token and position from the slot state the previous step left. */
  async begin(): Promise<void> {
    if (this.D > 0) await stepBegin(this.ctx, { rows: this.res.acts.rows, R: this.R, s: this.res.slots });
  }

  /** x = embedding rows of the step's tokens (f32 residual), times `scale` (Gemma: √hidden). */
  async embed(table: Linear, scale = 1): Promise<void> {
    await embed(this.ctx, { rows: this.res.acts.rows, table, x: this.res.acts.x, R: this.R, scale });
  }

  /** dst = src · Wᵀ, or x += src · Wᵀ with `dst = "x"` (the residual add, fused). */
  async linear(src: ActName, g: LinearGroup, dst: ActName | "x"): Promise<void> {
    await this.#linear(src, g, dst);
  }

  /**
   * dst = (rmsNorm(x) · weight) · Wᵀ. Decode rows normalise inside the vector matmul's x loads (one dispatch
   * fewer per norm); prefill rows write xn with the norm kernel, then take the tiled matmul.
   */
  async normLinear(weight: GPUBuffer, g: LinearGroup, dst: ActName, o: Normed = {}): Promise<void> {
    if (!o.prefillNormed) await this.prefillNorm(weight);
    await this.#linear("xn", g, dst, { weight, eps: this.res.dims.eps }, o.int8AnySize);
  }

  /** An activation buffer by name (hybrid ones only where the model declared them). */
  buffer(name: ActName): GPUBuffer {
    const a = this.res.acts;
    const b = name in a ? (a as unknown as Record<string, GPUBuffer>)[name] : hybridBuffer(a.hybrid, name);
    if (!b) throw new ShapeError(`activation "${name}" was not allocated for this model`);
    return b;
  }

  /**
   * xn = rmsNorm(x) · weight on the prefill rows (decode rows fuse the norm into their matmul); a block whose
   * several ops read the same norm runs it once and passes `prefillNormed` to them.
   */
  async prefillNorm(weight: GPUBuffer): Promise<void> {
    const { acts, dims } = this.res;
    const P = this.R - this.D;
    if (P > 0) {
      await rmsNorm(this.ctx, {
        x: acts.x,
        weight,
        y: acts.xn,
        R: P,
        row0: this.D,
        H: dims.hidden,
        eps: dims.eps,
      });
    }
  }

  /**
   * h = silu(gate) · up of (rmsNorm(x) · weight) · [gate | up]ᵀ. Decode rows do all of it in one vector
   * matmul when the weights allow (4-bit, one buffer); prefill rows take norm, tiled matmul, then silu_mul.
   */
  async normSwiGLU(weight: GPUBuffer, g: LinearGroup, act: GatedAct = "silu", o: Normed = {}): Promise<void> {
    const { acts, dims } = this.res;
    const w = g.parts[0].w;
    const I = g.N / 2;
    if (this.D === 0 || g.parts.length !== 1 || !canSwiGLU(w, "vec") || act !== "silu") {
      await this.normLinear(weight, g, "gu", o);
      await this.siluMul(I, act);
      return;
    }
    const P = this.R - this.D;
    const norm = { weight, eps: dims.eps };
    await matmul(this.ctx, { x: acts.x, w, y: acts.h, M: this.D, out: "swiglu", mode: "vec", norm });
    if (P > 0) {
      if (!o.prefillNormed) await this.prefillNorm(weight);
      await matmul(this.ctx, {
        x: acts.xn,
        w,
        y: acts.gu,
        M: P,
        row0: this.D,
        out: "act",
        mode: "tiled",
        ...this.#tiled(),
      });
      await siluMul(this.ctx, { gu: acts.gu, h: acts.h, R: P, row0: this.D, I });
    }
  }

  /** Scratch of the prefill matmuls: split-K's, sized for the step capacity (never the step's M), f16's. */
  #tiled(): Pick<MatmulArgs, "splitK" | "matrixScratch"> {
    const a = this.res.acts;
    return { splitK: { buffer: a.splitk, rows: a.cap.rows }, matrixScratch: a.matrix };
  }

  async #linear(
    src: ActName,
    g: LinearGroup,
    dst: ActName | "x",
    norm?: { weight: GPUBuffer; eps: number },
    int8AnySize = false,
  ): Promise<void> {
    const acts = this.res.acts;
    const x = this.buffer(src);
    const y = dst === "x" ? acts.x : this.buffer(dst);
    const out = dst === "x" ? "add" : F32_OUT.has(dst) ? "f32" : "act";
    const P = this.R - this.D;
    for (const p of g.parts) {
      if (this.D > 0) {
        // A fused norm reads the residual itself.
        const xv = norm ? acts.x : x;
        await matmul(this.ctx, {
          x: xv,
          w: p.w,
          y,
          M: this.D,
          out,
          mode: "vec",
          ldy: g.N,
          nOff: p.nOff,
          norm,
          int8AnySize,
        });
      }
      if (P > 0) {
        await matmul(this.ctx, {
          x,
          w: p.w,
          y,
          M: P,
          row0: this.D,
          out,
          mode: "tiled",
          ldy: g.N,
          nOff: p.nOff,
          ...this.#tiled(),
        });
      }
    }
  }

  /**
   * RoPE (+ optional per-head Q/K norm), K/V into the cache, then attention: qkv → attn. Decode rows do
   * the first part inside decode attention; prefill rows take rope.wgsl.
   */
  async attention(
    layer: number,
    opts: { qNorm?: GPUBuffer; kNorm?: GPUBuffer; scale?: number; window?: number; invFreq?: GPUBuffer } = {},
  ): Promise<void> {
    const { acts, dims, kv } = this.res;
    const kl = this.res.kvIndex[layer];
    if (kl < 0) throw new ShapeError(`layer ${layer} keeps no KV pages`);
    const common = {
      rows: acts.rows,
      pages: kv.tableOf(kl),
      kv: kv.layers[kl],
      kvScale: kv.scales?.[kl],
      nq: dims.nq,
      nkv: dims.nkv,
      hd: dims.hd,
      pageSize: kv.shape.pageSize,
      maxPages: kv.shape.maxPages,
    };
    const ropeArgs = {
      qkv: acts.qkv,
      invFreq: opts.invFreq ?? this.res.invFreq,
      qNorm: opts.qNorm,
      kNorm: opts.kNorm,
      rot: dims.rotary,
      eps: dims.eps,
      mscale: this.res.mscale,
    };
    // Decode rows: RoPE and the KV write go with decode attention (inside it for rows up to a few
    // thousand keys); prefill rows take rope.wgsl here.
    if (this.R > this.D) {
      await rope(this.ctx, { ...common, ...ropeArgs, q: acts.q, R: this.R - this.D, row0: this.D });
    }
    const scale = opts.scale ?? 1 / Math.sqrt(dims.hd);
    if (this.D > 0) {
      await attentionDecode(this.ctx, {
        ...common,
        rope: ropeArgs,
        q: acts.q,
        out: acts.attn,
        row0: 0,
        D: this.D,
        scale,
        ...(opts.window ? { window: opts.window } : {}),
        opart: acts.opart,
        ml: acts.ml,
        maxSplit: acts.maxSplit,
      });
    }
    for (const s of this.layout.segments) {
      kv.checkSegment(kl, opts.window, s.len);
      await attentionPrefill(this.ctx, {
        ...common,
        q: acts.q,
        out: acts.attn,
        row0: s.row0,
        S: s.len,
        scale,
        ...(opts.window ? { window: opts.window } : {}),
      });
    }
  }

  /** h = silu(gate) · up from the fused [gate | up] output of width 2·I (default the model's MLP). */
  async siluMul(I = this.res.dims.intermediate, act: GatedAct = "silu"): Promise<void> {
    const a = act === "silu" ? {} : { act };
    await siluMul(this.ctx, { gu: this.res.acts.gu, h: this.res.acts.h, R: this.R, I, ...a });
  }

  /**
   * Final norm on the rows that need logits, the LM head, and (layout "sampled") sampling; with `grammar`,
   * the grammar mask before sampling and the automaton advance after it.
   */
  async logits(norm: GPUBuffer, head: LinearGroup): Promise<void> {
    const L = this.lrows.length;
    if (L === 0) return;
    const { acts, dims } = this.res;
    await rmsNorm(this.ctx, {
      x: acts.x,
      weight: norm,
      y: acts.xl,
      R: L,
      H: dims.hidden,
      eps: dims.eps,
      gather: this.lrowsBuffer(),
    });
    // Sampled rows always take the vector kernel (batch invariance); "all" (tests, eval) takes the tiled one,
    // on f32 x: those logits are read in full, and int8 x moves them by ~0.06 (of ±20) on the bundled model.
    const mode = this.layout.logits === "all" ? "tiled" : "vec";
    for (const p of head.parts) {
      await matmul(this.ctx, {
        x: acts.xl,
        w: p.w,
        y: acts.logits,
        M: L,
        out: "f32",
        mode,
        ldy: head.N,
        nOff: p.nOff,
        f32x: true,
      });
    }
    if (this.layout.logits === "sampled") {
      const g = this.layout.grammar ? this.res.grammar : null;
      if (this.layout.grammar && !g) throw new ShapeError("a grammar layout, but no grammar tables");
      const common = { lrows: this.lrowsBuffer(), rows: acts.rows, L, s: this.res.slots };
      if (g) await grammarMask(this.ctx, { ...common, logits: acts.logits, V: head.N, g });
      await sample(this.ctx, { ...common, logits: acts.logits, V: head.N });
      if (g) await grammarAdvance(this.ctx, { ...common, g });
    }
  }

  #lrowsBuf: GPUBuffer | null = null;
  lrowsBuffer(): GPUBuffer {
    if (!this.#lrowsBuf) {
      this.#lrowsBuf = this.res.gpu.memory.create("params", {
        label: "lrows",
        size: Math.max(16, this.lrows.length * 4),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
      });
      // (Deno panics on a zero-byte writeBuffer.)
      if (this.lrows.length) {
        this.res.gpu.device.queue.writeBuffer(this.#lrowsBuf, 0, new Uint32Array(this.lrows));
      }
    }
    return this.#lrowsBuf;
  }

  /** Seals the recorded dispatches into a Plan. */
  finish(): Plan {
    this.ctx.arena.flush();
    return new Plan(this.layout, this.ctx.list, this.ctx.arena, this.lrowsBuffer(), this.lrows);
  }
}
