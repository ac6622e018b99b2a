/**
 * Running a case: check a kernel against its reference, and time it. The tests, `deno task kernel` and
 * the browser lab call these; an edited shader goes through `withShader` (harness.ts) around them.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { type Cost, type KernelCase, resolveShape, type Shape } from "./case.ts";
import type { OutputReport } from "./compare.ts";
import { runOnce, timeBound, type Timing } from "./harness.ts";
import type { ActDtype } from "./ref/half.ts";
import { Rng } from "./rng.ts";

export interface CheckReport {
  file: string;
  shape: Shape;
  act: ActDtype;
  seed: number;
  ok: boolean;
  outputs: OutputReport[];
  /** Validation errors the device reported meanwhile (a bad binding fails the check). */
  deviceErrors: string[];
}

export interface BenchReport extends CheckReport {
  timing: Timing | null;
  cost: Cost;
}

/** The activation dtype kernels on this device use. */
export function actOf(gpu: Gpu): ActDtype {
  return gpu.info.f16 ? "f16" : "f32";
}

/**
 * Random inputs for `shape` (over the case's defaults), one run through the host wrapper, compared with
 * the reference. With `iters` > 0 the bound kernels are timed afterwards.
 */
export async function runCase(
  gpu: Gpu,
  c: KernelCase,
  opts: { shape?: Shape; seed?: number; iters?: number; check?: boolean; wall?: boolean } = {},
): Promise<BenchReport> {
  const shape = resolveShape(c, opts.shape);
  const seed = opts.seed ?? 1;
  const act = actOf(gpu);
  gpu.takeErrors();
  const inputs = c.make(shape, new Rng(seed), { act, maxBinding: gpu.info.maxBinding });
  const bound = await c.bind(gpu, inputs);
  try {
    let outputs: OutputReport[] = [];
    if (opts.check !== false) {
      runOnce(bound);
      outputs = c.check(await bound.read(), inputs);
    }
    const timing = opts.iters ? await timeBound(bound, opts.iters, opts.wall) : null;
    const deviceErrors = gpu.takeErrors();
    return {
      file: c.files[0],
      shape,
      act,
      seed,
      ok: outputs.every((o) => o.ok) && deviceErrors.length === 0,
      outputs,
      deviceErrors,
      timing,
      cost: c.cost(shape, act),
    };
  } finally {
    bound.destroy();
  }
}
