/**
 * Test helpers over the kernel lab (src/lab): devices for both activation paths, and assertions that run a
 * case and fail with the lab's report (index, got, expected, max diff).
 */
import { afterAll, beforeAll, expect } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import type { KernelCase, Shape } from "../../src/lab/case.ts";
import { describeReport, type OutputReport } from "../../src/lab/compare.ts";
import { runCase } from "../../src/lab/run.ts";
import { runOnce } from "../../src/lab/harness.ts";
import { Rng } from "../../src/lab/rng.ts";

export type Path = "f16" | "f32";

/**
 * The devices of one test file: `f16` (activations in f16; null when the adapter lacks shader-f16) and
 * `f32` (forced with `f16: false`). Created once per file.
 */
export function devices(): {
  get(path: Path): Gpu | null;
  on(path: Path, fn: (gpu: Gpu) => Promise<void>): (ctx: { skip: (note?: string) => void }) => Promise<void>;
} {
  const gpus: Partial<Record<Path, Gpu | null>> = {};
  beforeAll(async () => {
    const f16 = await Gpu.create({ f16: true });
    gpus.f16 = f16.info.f16 ? f16 : null;
    if (!gpus.f16) f16.destroy();
    gpus.f32 = await Gpu.create({ f16: false });
  });
  afterAll(() => {
    gpus.f16?.destroy();
    gpus.f32?.destroy();
  });
  const get = (p: Path) => gpus[p] ?? null;
  return {
    get,
    /** A test body run on `path`'s device; skipped (with the reason) when the adapter has no shader-f16. */
    on: (path, fn) => async (ctx) => {
      const gpu = get(path);
      if (!gpu) return ctx.skip("the adapter has no shader-f16");
      await fn(gpu);
    },
  };
}

/**
 * Dawn's device where `ok` says the matrix-unit kernels run on it (the H200 with dawn.node), else null (no
 * dawn.node, or no adapter Dawn accepts, as lavapipe): the matrix-unit tests skip there.
 */
export async function matrixGpu(ok: (g: Gpu) => boolean): Promise<Gpu | null> {
  try {
    const g = await Gpu.create({ webgpu: "dawn" });
    if (ok(g)) return g;
    g.destroy();
  } catch {
    // no dawn.node, or no adapter
  }
  return null;
}

/** Why a matrix-unit test skips. */
export const NO_MATRIX_UNITS = "no Dawn adapter with f16 16×16×16 subgroup matrices here";

/** Runs `c` on `shape` over its small shape and asserts every output is within tolerance. */
export async function expectCase(gpu: Gpu, c: KernelCase, shape: Shape, seed = 1): Promise<OutputReport[]> {
  const r = await runCase(gpu, c, { shape: { ...c.small, ...shape }, seed });
  const text = `${c.files[0]} ${JSON.stringify(r.shape)} seed ${seed} (${r.act}):\n` +
    r.outputs.map(describeReport).join("\n") + r.deviceErrors.map((e) => `\ndevice error: ${e}`).join("");
  expect(r.deviceErrors, text).toEqual([]);
  expect(r.outputs.length, text).toBeGreaterThan(0);
  for (const o of r.outputs) expect(o.ok, text).toBe(true);
  return r.outputs;
}

/** The outputs of one run of `c` on `shape` (over its small shape), unchecked: for bitwise comparisons. */
export async function outputsOf(
  gpu: Gpu,
  c: KernelCase,
  shape: Shape,
  seed = 1,
): Promise<Record<string, Float64Array>> {
  const i = c.make({ ...c.small, ...shape }, new Rng(seed), {
    act: gpu.info.f16 ? "f16" : "f32",
    maxBinding: gpu.info.maxBinding,
  });
  const b = await c.bind(gpu, i);
  try {
    runOnce(b);
    return await b.read();
  } finally {
    b.destroy();
  }
}

/**
 * Asserts two arrays are bitwise equal (as float64 copies of f32/f16/u32 values), naming the first
 * difference.
 */
export function expectBitwise(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  expect(got.length, what).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) {
      expect.fail(`${what}: first difference at [${i}]: ${got[i]} vs ${want[i]}`);
    }
  }
}
