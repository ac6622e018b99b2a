/**
 * WeightLoader (src/loader/weights.ts) on small checkpoints written here, with every uploaded GPU buffer read
 * back and compared byte for byte, in MLX affine 4-bit g32, MLX affine 8-bit g64 and BF16 dense:
 * - `group` with row ranges: rows [[9,3],[0,4],[5,2]] of a 13-row tensor (out of order, odd counts) fused
 *   with a whole 5-row tensor, and a whole tensor then single rows; one Linear holding exactly those rows in
 *   that order in w, scales and biases.
 * - `experts` in the three checkpoint layouts (HF per-expert modules, MLX `switch_mlp` stacks, the HF fused
 *   `experts.gate_up_proj` stack, bf16 only), written from the same random weights: each load is the
 *   expert-major stacking (expert e's gate rows, then its up rows), so the layouts load byte-identically;
 *   and with a lowered binding limit, the stack split into shards of whole experts (e0, count, bytes).
 * - errors: a row range past the tensor's rows, and experts of differing formats, throw a LoaderError naming
 *   the tensor.
 * K = 128 throughout, so K/GS (4 for g32, 2 for g64) is even: the bf16 scale and bias rows (16-bit values,
 * 2 per u32) are then whole 32-bit words, as writeBuffer needs for rows copied one range at a time.
 * The loader's buffers are STORAGE | COPY_DST only, so the Gpu it is given here (`readable`) adds COPY_SRC
 * for readBuffer (and can state a smaller binding limit); the bytes the loader writes are untouched.
 * The tests that read buffers back also assert that no WebGPU validation error was raised.
 */
import { afterAll, describe, expect, test } from "vitest";
import { LoaderError } from "../../src/errors.ts";
import { Gpu } from "../../src/gpu/device.ts";
import type { MemoryCategory } from "../../src/gpu/memory.ts";
import { readBuffer } from "../../src/gpu/readback.ts";
import { ConfigReader, readQuant } from "../../src/loader/config.ts";
import { type DType, encodeSafetensors, f32ToBf16, readTensorIndex } from "../../src/loader/safetensors.ts";
import { type ExpertNames, WeightLoader } from "../../src/loader/weights.ts";
import type { ExpertLinear, WeightFormat } from "../../src/ops/linear.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";

const gpu = await Gpu.create();
const tmpDirs: string[] = [];
afterAll(async () => {
  gpu.destroy();
  for (const d of tmpDirs) await Deno.remove(d, { recursive: true }).catch(() => {});
});

const K = 128;
interface Fmt {
  label: string;
  q: { bits: number; gs: number } | null;
}
const Q4: Fmt = { label: "MLX affine 4-bit g32", q: { bits: 4, gs: 32 } };
const Q8: Fmt = { label: "MLX affine 8-bit g64", q: { bits: 8, gs: 64 } };
const BF16: Fmt = { label: "BF16", q: null };
const FORMATS = [Q4, Q8, BF16];

/** A module's rows, row-major: weight (MLX words or bf16 values) and, for MLX, bf16 scales and biases. */
type Key = "w" | "sc" | "bi";
type Mod = Partial<Record<Key, Uint8Array>>;
const keys = (f: Fmt): Key[] => (f.q ? ["w", "sc", "bi"] : ["w"]);
const rowBytes = (f: Fmt, k: Key) => (k === "w" ? (f.q ? (K * f.q.bits) / 8 : K * 2) : (K / f.q!.gs) * 2);
const loadedFormat = (f: Fmt): WeightFormat =>
  f.q ? { kind: "q", bits: f.q.bits, groupSize: f.q.gs, scaleF16: false } : { kind: "bf16" };

/** mulberry32: deterministic, never all zeros. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

function randomMod(f: Fmt, rows: number, rand: () => number): Mod {
  const bf16 = (n: number) => {
    const h = new Uint16Array(n);
    for (let i = 0; i < n; i++) h[i] = f32ToBf16((rand() / 2 ** 32) * 2 - 1) || 0x3f80;
    return new Uint8Array(h.buffer);
  };
  if (!f.q) return { w: bf16(rows * K) };
  const w = new Uint32Array((rows * rowBytes(f, "w")) / 4);
  for (let i = 0; i < w.length; i++) w[i] = rand() || 1;
  const groups = rows * (K / f.q.gs);
  return { w: new Uint8Array(w.buffer), sc: bf16(groups), bi: bf16(groups) };
}

/** The rows of `m` picked by [first, count] ranges, in order. */
function pick(f: Fmt, m: Mod, ranges: [number, number][]): Mod {
  const out: Mod = {};
  for (const k of keys(f)) {
    const rb = rowBytes(f, k);
    out[k] = cat(ranges.map(([first, n]) => m[k]!.subarray(first * rb, (first + n) * rb)));
  }
  return out;
}

function stack(f: Fmt, mods: Mod[]): Mod {
  const out: Mod = {};
  for (const k of keys(f)) out[k] = cat(mods.map((m) => m[k]!));
  return out;
}

function cat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

type Tensor = { name: string; dtype: DType; shape: number[]; data: Uint8Array };

/** Module `path` as checkpoint tensors with leading dims `lead` (weight under `path + suffix`). */
function tensors(f: Fmt, path: string, lead: number[], m: Mod, suffix = ".weight"): Tensor[] {
  if (!f.q) return [{ name: `${path}${suffix}`, dtype: "BF16", shape: [...lead, K], data: m.w! }];
  const groups = K / f.q.gs;
  return [
    { name: `${path}${suffix}`, dtype: "U32", shape: [...lead, (K * f.q.bits) / 32], data: m.w! },
    { name: `${path}.scales`, dtype: "BF16", shape: [...lead, groups], data: m.sc! },
    { name: `${path}.biases`, dtype: "BF16", shape: [...lead, groups], data: m.bi! },
  ];
}

/** Writes model.safetensors + config.json (with the MLX quantization block when `f.q`) and opens a loader. */
async function checkpoint(f: Fmt, list: Tensor[], on: Gpu = readable()): Promise<WeightLoader> {
  const dir = await Deno.makeTempDir({ prefix: "flint-weights-test-" });
  tmpDirs.push(dir);
  await Deno.writeFile(`${dir}/model.safetensors`, cat(encodeSafetensors(list)));
  const json = f.q ? { quantization: { group_size: f.q.gs, bits: f.q.bits } } : {};
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(json));
  const src = new DiskModelSource(dir);
  return new WeightLoader(
    on,
    src,
    await readTensorIndex(src),
    readQuant(new ConfigReader("config.json", json)),
  );
}

/**
 * What a WeightLoader gets as its Gpu here: the test's device and memory ledger, with the loader's buffers
 * (always category "weights", STORAGE | COPY_DST) also made COPY_SRC so readBuffer can copy them out, and
 * optionally a smaller stated binding limit (Gpu.create asks for the adapter's full limit and has no option
 * to lower it). WeightLoader reads only `device`, `memory.create` and `info.maxBinding` of its Gpu.
 */
function readable(maxBinding = gpu.info.maxBinding): Gpu {
  const memory = {
    create(category: MemoryCategory, desc: GPUBufferDescriptor): GPUBuffer {
      expect(category).toBe("weights");
      expect(desc.usage).toBe(GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST);
      return gpu.memory.create(category, { ...desc, usage: desc.usage | GPUBufferUsage.COPY_SRC });
    },
  };
  return { device: gpu.device, memory, info: { ...gpu.info, maxBinding } } as unknown as Gpu;
}

/** Index of the first differing byte, -1 when equal (and equally long). */
function firstDiff(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.byteLength, b.byteLength);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.byteLength === b.byteLength ? -1 : n;
}

/** A shard's w / scales / biases read back, each as long as `want`'s. */
async function readShard(
  f: Fmt,
  s: { w: GPUBuffer; scales?: GPUBuffer; biases?: GPUBuffer },
  want: Mod,
): Promise<Mod> {
  if (!f.q) expect(s.scales ?? s.biases).toBeUndefined();
  const bufs = { w: s.w, sc: s.scales, bi: s.biases };
  const out: Mod = {};
  for (const k of keys(f)) {
    expect(bufs[k]!.size).toBe(Math.max(16, want[k]!.byteLength));
    out[k] = new Uint8Array(await readBuffer(gpu, bufs[k]!, 0, want[k]!.byteLength));
  }
  return out;
}

function expectMod(f: Fmt, got: Mod, want: Mod) {
  for (const k of keys(f)) expect(firstDiff(got[k]!, want[k]!), `${k}: first differing byte`).toBe(-1);
}

async function loaderError(p: Promise<unknown>): Promise<LoaderError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof LoaderError) return e;
    throw e;
  }
  throw new Error("expected a LoaderError");
}

describe.each(FORMATS)("group with row ranges, $label", (f) => {
  const rand = prng(f.q ? f.q.bits * 100 + f.q.gs : 16);
  const a = randomMod(f, 13, rand);
  const b = randomMod(f, 5, rand);
  const list = [...tensors(f, "m.a", [13], a), ...tensors(f, "m.b", [5], b)];

  test("ranges out of order, fused with a whole tensor", async () => {
    const l = await checkpoint(f, list);
    const ranges: [number, number][] = [[9, 3], [0, 4], [5, 2]];
    const g = await l.group([{ path: "m.a", rows: ranges }, "m.b"], [9, 5], K);
    expect(g.N).toBe(14);
    expect(g.K).toBe(K);
    expect(g.parts.length).toBe(1);
    expect(g.parts[0].nOff).toBe(0);
    const w = g.parts[0].w;
    expect({ name: w.name, N: w.N, K: w.K, format: w.format }).toEqual({
      name: "m.a+m.b",
      N: 14,
      K,
      format: loadedFormat(f),
    });
    expect(w.shards.map((s) => [s.n0, s.n])).toEqual([[0, 14]]);
    const want = stack(f, [pick(f, a, ranges), b]);
    expectMod(f, await readShard(f, w.shards[0], want), want);

    // A whole tensor first, then single rows.
    const g2 = await l.group(["m.b", { path: "m.a", rows: [[12, 1], [3, 1]] }], [5, 2], K);
    expect(g2.parts.length).toBe(1);
    expect(g2.parts[0].w.N).toBe(7);
    const want2 = stack(f, [b, pick(f, a, [[12, 1], [3, 1]])]);
    expectMod(f, await readShard(f, g2.parts[0].w.shards[0], want2), want2);
    expect(gpu.takeErrors()).toEqual([]);
  });

  test("a row range past the tensor's rows is a LoaderError naming the tensor", async () => {
    const l = await checkpoint(f, list);
    const e = await loaderError(l.group([{ path: "m.a", rows: [[0, 4], [10, 4]] }, "m.b"], [8, 5], K));
    expect(e.field).toBe("m.a.weight");
    expect(e.file).toMatch(/model\.safetensors$/);
    expect(e.message).toContain("rows [[0,4],[10,4]] of [13,");
  });
});

describe.each(FORMATS)("experts, $label", (f) => {
  const [E, I] = [5, 3];
  const sum = 2 * I;
  const rand = prng(f.q ? 7 * f.q.bits + f.q.gs : 3);
  const gate = randomMod(f, E * I, rand);
  const up = randomMod(f, E * I, rand);
  const expert = (e: number) => stack(f, [pick(f, gate, [[e * I, I]]), pick(f, up, [[e * I, I]])]);
  /** Expert-major: expert e's gate rows, then its up rows. */
  const want = stack(f, Array.from({ length: E }, (_, e) => expert(e)));
  const at = (prefix: string): ExpertNames => ({
    prefix,
    names: ["gate_proj", "up_proj"],
    fused: "experts.gate_up_proj",
  });

  const layouts: [string, string, Tensor[]][] = [
    ["HF per-expert", "model.layers.0.mlp", []],
    ["MLX switch_mlp stacks", "model.layers.1.mlp", [
      ...tensors(f, "model.layers.1.mlp.switch_mlp.gate_proj", [E, I], gate),
      ...tensors(f, "model.layers.1.mlp.switch_mlp.up_proj", [E, I], up),
    ]],
  ];
  for (let e = 0; e < E; e++) {
    layouts[0][2].push(
      ...tensors(f, `model.layers.0.mlp.experts.${e}.gate_proj`, [I], pick(f, gate, [[e * I, I]])),
      ...tensors(f, `model.layers.0.mlp.experts.${e}.up_proj`, [I], pick(f, up, [[e * I, I]])),
    );
  }
  // HF fused stacks are bf16 [E, 2I, K] under the bare name: by definition the expert-major stacking.
  if (!f.q) {
    layouts.push([
      "HF fused gate_up_proj",
      "model.layers.2.mlp",
      tensors(f, "model.layers.2.mlp.experts.gate_up_proj", [E, sum], want, ""),
    ]);
  }
  const all = layouts.flatMap(([, , t]) => t);

  function expectHeader(x: ExpertLinear, prefix: string) {
    expect({ name: x.name, E: x.E, N: x.N, K: x.K, format: x.format }).toEqual({
      name: `${prefix}.experts`,
      E,
      N: sum,
      K,
      format: loadedFormat(f),
    });
  }

  test(`${layouts.map(([n]) => n).join(", ")}: the same stacking, byte for byte`, async () => {
    const l = await checkpoint(f, all);
    const loaded: Mod[] = [];
    for (const [, prefix] of layouts) {
      const x = await l.experts(at(prefix), E, [I, I], K);
      expectHeader(x, prefix);
      expect(x.shards.map((s) => [s.e0, s.count])).toEqual([[0, E]]);
      loaded.push(await readShard(f, x.shards[0], want));
    }
    for (const got of loaded) expectMod(f, got, want);
    for (const got of loaded.slice(1)) expectMod(f, got, loaded[0]);
    expect(gpu.takeErrors()).toEqual([]);
  });

  test("a small binding limit splits the stack by whole experts", async () => {
    // Two experts' weight rows fit, a third does not: shards of 2, 2, 1 experts.
    const perExpert = sum * rowBytes(f, "w");
    const maxBinding = 2 * perExpert + perExpert / 2;
    const l = await checkpoint(f, all, readable(maxBinding));
    for (const [, prefix] of layouts) {
      const x = await l.experts(at(prefix), E, [I, I], K);
      expectHeader(x, prefix);
      expect(x.shards.map((s) => [s.e0, s.count])).toEqual([[0, 2], [2, 2], [4, 1]]);
      for (const s of x.shards) {
        expect(s.w.size).toBeLessThanOrEqual(maxBinding);
        const part = pick(f, want, [[s.e0 * sum, s.count * sum]]);
        expectMod(f, await readShard(f, s, part), part);
      }
    }
    expect(gpu.takeErrors()).toEqual([]);
  });

  test("experts of differing formats are a LoaderError naming the tensor", async () => {
    // Expert 2's up_proj in another format: bf16 (no scales) among quantized experts, f16 among bf16 ones.
    const other = f.q ? BF16 : { label: "F16", q: null };
    const odd = tensors(other, "model.layers.0.mlp.experts.2.up_proj", [I], randomMod(other, I, rand))
      .map((t) => (f.q ? t : { ...t, dtype: "F16" as DType }));
    const list = layouts[0][2].filter((t) => !t.name.startsWith("model.layers.0.mlp.experts.2.up_proj."));
    const l = await checkpoint(f, [...list, ...odd]);
    const e = await loaderError(l.experts(at("model.layers.0.mlp"), E, [I, I], K));
    expect(e.field).toBe("model.layers.0.mlp.experts");
    expect(e.message).toContain("experts differ in format");
  });
});
