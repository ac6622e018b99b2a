/**
 * The kernel-lab registry: every kernel file in wgsl/ (not lib/, not the probes) → its case. The tests,
 * `deno task kernel` and the browser lab page all look kernels up here.
 *
 * @example Check an edited shader against the reference, then time it against the adapter's ceilings:
 * ```ts
 * const c = caseFor("rms_norm.wgsl");
 * const r = await withShader(gpu, "rms_norm.wgsl", editedText, () =>
 *   runCase(gpu, c, { shape: c.small, iters: 20 }));
 * // r.ok, r.outputs (max error per output, first failures), r.timing.medianMs, r.cost.bytes / r.cost.flops
 * const ceil = await measureCeilings(gpu); // ceil.readGBs, ceil.f32GFlops, ceil.f16GFlops
 * ```
 * @module
 */
import { ShapeError } from "../errors.ts";
import type { KernelCase } from "./case.ts";
import { attentionDecodeCase } from "./cases/attention_decode.ts";
import { attentionPrefillCase, attentionPrefillMatrixCase } from "./cases/attention_prefill.ts";
import { siluMulCase } from "./cases/elementwise.ts";
import { embedCase } from "./cases/embed.ts";
import { fillCase } from "./cases/fill.ts";
import { sigmoidGateCase } from "./cases/gate.ts";
import { grammarAdvanceCase, grammarMaskCase } from "./cases/grammar.ts";
import {
  matmulSgmatCase,
  matmulSplitKCase,
  matmulTiledCase,
  matmulTiledX8Case,
  matmulVecCase,
} from "./cases/matmul.ts";
import { moeCombineCase, moeRouteCase } from "./cases/moe.ts";
import { moeTiledCase, moeVecCase } from "./cases/moe_matmul.ts";
import { rmsNormCase } from "./cases/norm.ts";
import { causalConvCase, gatedDeltaCase, gatedDeltaChunkCase } from "./cases/recurrent.ts";
import { ropeCase } from "./cases/rope.ts";
import { sampleCase, stepBeginCase } from "./cases/sample.ts";

export type { KernelCase, Shape } from "./case.ts";

/**
 * All cases, one per kernel (attention_decode and attention_combine share one, as do the three kernels of
 * the chunked gated delta rule: they run together).
 */
export const CASES: readonly KernelCase[] = [
  embedCase,
  rmsNormCase,
  matmulVecCase,
  matmulTiledCase,
  matmulTiledX8Case,
  matmulSplitKCase,
  matmulSgmatCase,
  ropeCase,
  attentionDecodeCase,
  attentionPrefillCase,
  attentionPrefillMatrixCase,
  siluMulCase,
  sigmoidGateCase,
  moeRouteCase,
  moeVecCase,
  moeTiledCase,
  moeCombineCase,
  sampleCase,
  stepBeginCase,
  grammarMaskCase,
  grammarAdvanceCase,
  fillCase,
  causalConvCase,
  gatedDeltaCase,
  gatedDeltaChunkCase,
];

/** Case for a kernel file name ("matmul_vec.wgsl", "wgsl/matmul_vec.wgsl" or "matmul_vec"). */
export function caseFor(file: string): KernelCase {
  const name = file.replace(/^.*wgsl\//, "").replace(/\.wgsl$/, "") + ".wgsl";
  const c = CASES.find((c) => c.files.includes(name));
  if (!c) throw new ShapeError(`no lab case for ${file} (kernels: ${labKernels().join(", ")})`);
  return c;
}

/** Every kernel file that has a case. */
export function labKernels(): string[] {
  return CASES.flatMap((c) => c.files);
}
