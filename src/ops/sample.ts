/** Host wrappers of `sample.wgsl` (choose the next ids, advance slots) and `step_begin.wgsl`. @module */
import { type OpContext, record } from "./context.ts";

/** Per-slot decode state on the GPU: the buffers the CPU-free decode loop runs on. */
export interface SlotBuffers {
  /** (slots) SampleParams, 32 bytes each. */
  sampling: GPUBuffer;
  /** (slots) SlotState {pos, limit, done, _}. */
  slots: GPUBuffer;
  /** (slots, ctx) u32 token history: prompt and generated ids by position. */
  hist: GPUBuffer;
  /** (1 + n) u32: count, then EOS ids. */
  eos: GPUBuffer;
  ctx: number;
}

export async function sample(
  ctx: OpContext,
  a: { logits: GPUBuffer; lrows: GPUBuffer; rows: GPUBuffer; L: number; V: number; s: SlotBuffers },
): Promise<void> {
  await record(ctx, { file: "sample.wgsl", overrides: { WG: 256 } }, {
    buffers: {
      logits: a.logits,
      lrows: a.lrows,
      rows: a.rows,
      sp: a.s.sampling,
      slots: a.s.slots,
      hist: a.s.hist,
      eos: a.s.eos,
    },
    params: { V: a.V, ctx: a.s.ctx },
    grid: [a.L, 1, 1],
  });
}

export async function stepBegin(
  ctx: OpContext,
  a: { rows: GPUBuffer; R: number; s: SlotBuffers },
): Promise<void> {
  await record(ctx, { file: "step_begin.wgsl", overrides: { WG: 64 } }, {
    buffers: { slots: a.s.slots, hist: a.s.hist, rows: a.rows },
    params: { R: a.R, ctx: a.s.ctx },
    grid: [Math.ceil(a.R / 64), 1, 1],
  });
}
