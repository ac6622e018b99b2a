/**
 * What every host wrapper records into: the device, the plan's uniform arena, and the dispatch list.
 * Wrappers check shapes, pick the kernel variant, compute the grid, and append dispatches; nothing runs
 * until the plan is encoded into a compute pass.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { type Dispatch, type KernelSpec, makeDispatch, type ParamArena } from "../gpu/kernel.ts";
import type { BufferResource } from "../gpu/kernel.ts";
import { ShapeError } from "../errors.ts";

export interface OpContext {
  gpu: Gpu;
  arena: ParamArena;
  list: Dispatch[];
}

/** Compiles (or fetches) the kernel and appends one dispatch. */
export async function record(
  ctx: OpContext,
  spec: KernelSpec,
  opts: { buffers: Record<string, BufferResource>; params?: Record<string, number>; grid: Dispatch["grid"] },
): Promise<Dispatch> {
  const kernel = await ctx.gpu.kernels.get(spec);
  const d = makeDispatch(ctx.gpu, kernel, ctx.arena, opts);
  ctx.list.push(d);
  return d;
}

/** Throws a ShapeError quoting the op and the offending shapes unless `ok`. */
export function check(ok: boolean, op: string, what: string): void {
  if (!ok) throw new ShapeError(`${op}: ${what}`);
}
