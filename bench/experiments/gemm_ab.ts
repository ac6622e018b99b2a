/**
 * A/B of prefill-matmul profiles kernel by kernel: loads one model once (its own buffers, as
 * bench/kernels.ts), then times each linear of a layer (qkv, o_proj, gate_up, down_proj) as the engine runs
 * it in a prefill step of M rows, under each tiled-matmul profile in turn, interleaved (A B C A B C ...), so
 * drift in the GPU's clocks hits all alike. Each list cycles through four layers (weights past L2).
 *   deno run -A bench/experiments/gemm_ab.ts [--synthetic qwen3-4b | --model DIR] [--rows 512,2048]
 *     [--rounds 3] [--configs '[{},{"wideTileMinWorkgroups":0}]'] [--webgpu deno|dawn] [--wall]
 *   On matrix units: --webgpu dawn --configs '[{"matrixUnits":false},{"matrixUnits":true}]' (the engine loads
 *   with them on, so their scratch exists).
 * A config is a partial `MatmulProfile["tiled"]` (src/gpu/profile.ts). Prints one line per measurement and
 * the median µs per config, row count and linear.
 * @module
 */
import { parseFlags, webgpuFlag } from "../../src/cli/args.ts";
import type { Activations } from "../../src/engine/resources.ts";
import { ParamArena } from "../../src/gpu/kernel.ts";
import type { MatmulProfile } from "../../src/gpu/profile.ts";
import type { DecoderWeights } from "../../src/models/llama.ts";
import type { OpContext } from "../../src/ops/context.ts";
import { matmul } from "../../src/ops/matmul.ts";
import { DEFAULT_MODEL_DIR } from "../../src/platform/deno.ts";
import { LINEARS } from "../kernels.ts";
import { loadModel } from "../measure.ts";
import { GpuTimer } from "../timer.ts";

const f = parseFlags(
  Deno.args,
  {
    synthetic: "string",
    model: "string",
    rows: "string",
    rounds: "number",
    configs: "string",
    webgpu: "string",
    wall: "boolean",
  } as const,
);
const configs: Partial<MatmulProfile["tiled"]>[] = JSON.parse(f.configs ?? "[{}]");
const rowsList = (f.rows ?? "512,2048").split(",").map(Number);
const rounds = f.rounds ?? 3;
const spec = f.synthetic ? { synthetic: f.synthetic } : { dir: f.model ?? DEFAULT_MODEL_DIR };
const matrixUnits = configs.some((c) => c.matrixUnits);
const { engine } = await loadModel(spec, {
  contextWindow: 4096,
  prefillChunk: Math.max(...rowsList),
  webgpu: webgpuFlag(f.webgpu),
  ...(matrixUnits ? { profile: { matmul: { tiled: { matrixUnits } } } } : {}),
});
const w = engine.weights as DecoderWeights;
const { gpu, acts } = engine;
const timer = new GpuTimer(gpu, { wall: !!f.wall });
console.log(`${gpu.info.adapter} (${gpu.info.webgpu}), timing by ${timer.method}`);
const arena = new ParamArena(gpu);
const few = w.layers.slice(0, Math.min(4, w.layers.length));
const a: Activations = acts;
const res = new Map<string, number[]>();
const push = (k: string, v: number) => res.set(k, [...(res.get(k) ?? []), v]);
for (let r = 0; r < rounds; r++) {
  for (const [ci, c] of configs.entries()) {
    const g = gpu.withProfile({ matmul: { tiled: c } });
    for (const M of rowsList) {
      let total = 0;
      const parts: string[] = [];
      for (const L of LINEARS) {
        const ctx: OpContext = { gpu: g, arena, list: [] };
        for (const layer of few) {
          const lg = L.get(layer);
          for (const p of lg.parts) {
            await matmul(ctx, {
              x: a[L.x],
              w: p.w,
              y: a[L.y],
              M,
              out: L.out,
              mode: "tiled",
              ldy: lg.N,
              nOff: p.nOff,
              splitK: { buffer: a.splitk, rows: a.cap.rows },
              matrixScratch: a.matrix,
            });
          }
        }
        arena.flush();
        const us = (await timer.time(ctx.list, { maxKvLen: 0 })).ms * 1000 / few.length;
        total += us;
        parts.push(`${L.name} ${us.toFixed(0)}`);
        push(`${ci} ${JSON.stringify(c)} M=${M} ${L.name}`, us);
      }
      push(`${ci} ${JSON.stringify(c)} M=${M} total`, total);
      console.log(
        `round ${r} config ${ci} ${JSON.stringify(c)} M=${M}: ${parts.join(", ")} µs; total ${
          total.toFixed(0)
        } µs`,
      );
    }
  }
}
const median = (v: number[]) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];
for (const [k, v] of res) console.log(`median ${k}: ${median(v).toFixed(1)} µs`);
