/**
 * Prefill attention alone, per profile: the lab case (src/lab/cases/attention_prefill.ts, random inputs) at a
 * real shape, timed with timestamp queries, each config bound in turn on the same inputs.
 *   deno run -A bench/experiments/pattn_probe.ts [--rows 2048] [--depth 12288] [--heads 32,8,128] [--iters 5]
 *     [--kv-cache act|q8]
 *     [--configs '[{"quad":false},{}]']   (PrefillAttentionProfile changes, src/gpu/profile.ts)
 *     [--check]   (each config is first checked against the float64 reference on two small odd shapes of the
 *                  same heads and cache: a variant is timed only where it is also right on this device)
 * Prints ms per call (median of the samples, after 1.5 s of warm-up runs: a new pipeline starts slow)
 * and TFLOP/s (4·keys·nq·hd per call). Defaults: one layer of the 4B chunk "prefill at 12k–14k" times.
 * @module
 */
import { kvCacheFlag, parseFlags } from "../../src/cli/args.ts";
import { Gpu } from "../../src/gpu/device.ts";
import type { PrefillAttentionProfile } from "../../src/gpu/profile.ts";
import { attentionPrefillCase } from "../../src/lab/cases/attention_prefill.ts";
import { describeReport } from "../../src/lab/compare.ts";
import { timeBound } from "../../src/lab/harness.ts";
import { runCase } from "../../src/lab/run.ts";
import { Rng } from "../../src/lab/rng.ts";

const f = parseFlags(
  Deno.args,
  {
    rows: "number",
    depth: "number",
    heads: "string",
    iters: "number",
    "kv-cache": "string",
    configs: "string",
    check: "boolean",
  } as const,
);
const S = f.rows ?? 2048, p0 = f.depth ?? 12288, iters = f.iters ?? 5;
const [nq, nkv, hd] = (f.heads ?? "32,8,128").split(",").map(Number);
const kv8 = kvCacheFlag(f["kv-cache"]) === "q8" ? 1 : 0;
const configs: Partial<PrefillAttentionProfile>[] = JSON.parse(f.configs ?? "[{}]");

const base = await Gpu.create({ f16: true });
console.log(
  `${base.info.adapter}: ${S} rows at depth ${p0}, heads ${nq}/${nkv} × ${hd}, ${kv8 ? "q8" : "f16"} cache`,
);
// qk8 and hqk are shape keys of the case (its reference quantizes q / sums scores alike): on unless a config
// turns them off, as the engine's defaults are.
const shape = {
  S,
  p0,
  nq,
  nkv,
  hd,
  ps: 16,
  row0: 0,
  kv8,
  qk8: kv8 && hd % 32 === 0 ? 1 : 0,
  hqk: 0,
  qspread: 0,
};
const inputs = attentionPrefillCase.make(shape, new Rng(1), {
  act: base.info.f16 ? "f16" : "f32",
  maxBinding: base.info.maxBinding,
});
const flops = 4 * (S * p0 + (S * (S + 1)) / 2) * nq * hd;
for (const c of configs) {
  const gpu = base.withProfile({ prefillAttention: c });
  // The case's qk8 / hqk shape keys pick the numerics (its reference mirrors them): from the config.
  const numerics = { qk8: c.int8QK === false ? 0 : shape.qk8, hqk: c.f16QK === false ? 0 : 1 };
  {
    if (f.check) {
      for (const [S, p0] of [[70, 101], [40, 1601]]) {
        const r = await runCase(gpu, attentionPrefillCase, {
          shape: { ...shape, S, p0, ps: 7, row0: 1, ...numerics },
          seed: 3,
        });
        console.log(
          `  check ${S} rows at ${p0}: ${r.ok ? "ok" : "FAIL"} ${
            r.outputs.map(describeReport).join("; ").split("\n")[0]
          } ${r.deviceErrors.join(" ")}`,
        );
      }
    }
    inputs.shape = { ...shape, ...numerics };
    const bound = await attentionPrefillCase.bind(gpu, inputs);
    try {
      // A new pipeline runs several times slower for its first ~0.3 s on the H200 (seen for every new
      // variant: 4–7 slow samples, then steady), so each config is run for 1.5 s before it is timed.
      const w0 = performance.now();
      while (performance.now() - w0 < 1500) await timeBound(bound, 5);
      const t = await timeBound(bound, iters);
      const ms = t.medianMs;
      console.log(
        `${JSON.stringify(c).padEnd(30)} ${ms.toFixed(3)} ms  ${(flops / ms / 1e9).toFixed(1)} TFLOP/s  [${
          t.samples.map((x) => x.toFixed(2)).join(" ")
        }]`,
      );
    } finally {
      bound.destroy();
    }
  }
}
