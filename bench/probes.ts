/**
 * The ceilings of this run, measured on the same device: a streaming-read probe (bytes/s a kernel can pull
 * from memory) and a matmul probe (f32 FLOP/s of a register-tiled WGSL kernel). Each tries a few variants
 * and keeps the best. Decode is compared with the first, prefill with the second.
 * (The kernel lab's src/lab/probes.ts did not exist when this was written; these kernels are bench/wgsl/.)
 * @module
 */
import type { Gpu } from "../src/gpu/device.ts";
import { encodeDispatches, grid1d, ParamArena } from "../src/gpu/kernel.ts";
import type { OpContext } from "../src/ops/context.ts";
import { record } from "../src/ops/context.ts";
import { fillRandom } from "../src/ops/fill.ts";
import { GpuTimer, type TimerOptions } from "./timer.ts";

export interface ProbeVariant {
  variant: string;
  ms: number;
  /** GB/s (read probe) or GFLOP/s (matmul probe). */
  rate: number;
}

export interface Ceilings {
  readGBs: number;
  matmulGFLOPs: number;
  readBytes: number;
  matmulSize: number;
  read: ProbeVariant[];
  matmul: ProbeVariant[];
  timing: string;
}

const READ_FILE = "../bench/wgsl/probe_read.wgsl";
const MATMUL_FILE = "../bench/wgsl/probe_matmul.wgsl";

/** Runs both probes. `quick`: small buffers (a software adapter takes seconds per GB). */
export async function measureCeilings(gpu: Gpu, opts: { quick?: boolean; timer?: TimerOptions } = {}): Promise<Ceilings> {
  const timer = new GpuTimer(gpu, opts.timer);
  const arena = new ParamArena(gpu);
  const d = gpu.device;
  // Probe buffers are made outside the memory ledger: the ledger's peak is the engine's.
  const scratch: GPUBuffer[] = [];
  const buffer = (size: number) => {
    const b = d.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    scratch.push(b);
    return b;
  };
  const ctx = (): OpContext => ({ gpu, arena, list: [] });
  try {
    // Read probe: 1 GiB (well past any cache) or what one binding allows.
    const want = opts.quick ? 32 * 2 ** 20 : 2 ** 30;
    const readBytes = Math.floor(Math.min(want, gpu.info.maxBinding, gpu.info.maxBuffer) / 16) * 16;
    const src = buffer(readBytes);
    const out = buffer(16);
    const fill = ctx();
    // Random contents: a zero page could be compressed or short-cut by the memory system.
    await fillRandom(fill, { out: src, words: readBytes / 4, seed: 12345, fill: { kind: "raw" } });
    arena.flush();
    submit(gpu, fill.list);
    const read: ProbeVariant[] = [];
    for (const WG of [256, 512, 1024].filter((w) => w <= gpu.info.maxInvocations)) {
      for (const ITEMS of [4, 8]) {
        const c = ctx();
        const n = readBytes / 16;
        await record(c, { file: READ_FILE, overrides: { WG, ITEMS } }, {
          buffers: { src, out },
          params: { n, magic: 0x9e3779b9 },
          grid: grid1d(Math.ceil(n / (WG * ITEMS))),
        });
        arena.flush();
        const t = await timer.time(c.list);
        read.push({ variant: `wg${WG}x${ITEMS}`, ms: t.ms, rate: readBytes / (t.ms * 1e6) });
      }
    }

    // Matmul probe: square f32 problems.
    const S = opts.quick ? 256 : 4096;
    const bytes = S * S * 4;
    const [a, b, cbuf] = [buffer(bytes), buffer(bytes), buffer(bytes)];
    const fm = ctx();
    await fillRandom(fm, { out: a, words: S * S, seed: 1, fill: { kind: "uniformF32", lo: -1, hi: 1 } });
    await fillRandom(fm, { out: b, words: S * S, seed: 2, fill: { kind: "uniformF32", lo: -1, hi: 1 } });
    arena.flush();
    submit(gpu, fm.list);
    const matmul: ProbeVariant[] = [];
    const tiles = [
      { BM: 64, BN: 64, BK: 16, TM: 4, TN: 4 },
      { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8 },
      { BM: 128, BN: 64, BK: 16, TM: 8, TN: 4 },
    ];
    for (const t of tiles) {
      const c = ctx();
      await record(c, { file: MATMUL_FILE, defines: { ...t } }, {
        buffers: { a, b, c: cbuf },
        params: { M: S, N: S, K: S },
        grid: [S / t.BN, S / t.BM, 1],
      });
      arena.flush();
      const r = await timer.time(c.list);
      matmul.push({ variant: `${t.BM}x${t.BN}x${t.BK}/${t.TM}x${t.TN}`, ms: r.ms, rate: (2 * S ** 3) / (r.ms * 1e6) });
    }
    return {
      readGBs: Math.max(...read.map((v) => v.rate)),
      matmulGFLOPs: Math.max(...matmul.map((v) => v.rate)),
      readBytes,
      matmulSize: S,
      read,
      matmul,
      timing: timer.method,
    };
  } finally {
    await d.queue.onSubmittedWorkDone();
    timer.destroy();
    arena.destroy();
    for (const b of scratch) b.destroy();
  }
}

function submit(gpu: Gpu, list: OpContext["list"]): void {
  const enc = gpu.device.createCommandEncoder();
  const pass = enc.beginComputePass();
  encodeDispatches(pass, list, { maxKvLen: 0 });
  pass.end();
  gpu.device.queue.submit([enc.finish()]);
}
