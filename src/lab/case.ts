/**
 * What a kernel-lab case is. One case per kernel (attention_decode + attention_combine share one): it makes
 * random inputs for a shape, runs the kernel through its real host wrapper, computes the float64
 * reference, states its tolerance per activation dtype, and counts bytes and FLOPs. The tests, `deno task
 * kernel` and the browser lab all drive kernels through this interface, so an edited shader
 * (`withShader` in harness.ts) is checked exactly like the shipped one.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { ShapeError } from "../errors.ts";
import { compare, type OutputReport, type Tolerance } from "./compare.ts";
import type { Bound } from "./harness.ts";
import type { ActDtype } from "./ref/half.ts";
import type { Rng } from "./rng.ts";

/** A case's shape: named sizes and switches ("M": 13, "w": "q4g64", "out": "add"). */
export type Shape = Record<string, number | string>;

export interface Cost {
  /** Bytes one run must move at least (reads + writes of the buffers it touches). */
  bytes: number;
  /** Floating-point operations of one run (a multiply-add counts 2). */
  flops: number;
  /** The operations run on integer dot products (int8 x): compared with the int8 matmul probe. */
  int8?: boolean;
}

/** What a case knows about the device when it makes inputs. */
export interface CaseEnv {
  act: ActDtype;
  /** Largest storage binding: big weights are split into row shards below it. */
  maxBinding: number;
}

/** Inputs of every case carry their shape and dtype, so checks and costs need nothing else. */
export interface CaseInputs {
  shape: Shape;
  act: ActDtype;
}

export interface KernelCase<I extends CaseInputs = any> {
  /** Kernel files the case runs; the first is its name. */
  files: string[];
  summary: string;
  /** Realistic shape (Qwen3-4B: hidden 2560, 32 q / 8 kv heads, head_dim 128, MLP 9728). */
  defaults: Shape;
  /** Small odd shape, quick on a software adapter. */
  small: Shape;
  /** One line per shape key. */
  keys: Record<string, string>;
  /** Random never-zero inputs for a full shape (host side only). Throws ShapeError on a bad shape. */
  make(shape: Shape, rng: Rng, env: CaseEnv): I;
  /** Uploads the inputs and records the kernel(s) through the host wrapper. */
  bind(gpu: Gpu, inputs: I): Promise<Bound>;
  /** Compares outputs read back from `bind`'s buffers with the float64 reference. */
  check(got: Record<string, Float64Array>, inputs: I): OutputReport[];
  /** Tolerance per output for this shape and activation dtype. */
  tolerance(shape: Shape, act: ActDtype): Record<string, Tolerance>;
  cost(shape: Shape, act: ActDtype): Cost;
}

/** Compares each named output with its reference at the case's tolerance. */
export function compareAll(
  got: Record<string, Float64Array>,
  want: Record<string, Float64Array>,
  tol: Record<string, Tolerance>,
): OutputReport[] {
  return Object.keys(want).map((k) => compare(k, got[k] ?? new Float64Array(0), want[k], tol[k]));
}

/** Defaults overlaid with `over`, checked against the case's keys and value types. */
export function resolveShape(c: KernelCase, over: Shape = {}): Shape {
  const out: Shape = { ...c.defaults };
  for (const [k, v] of Object.entries(over)) {
    if (!(k in c.defaults)) {
      throw new ShapeError(
        `${c.files[0]}: unknown shape key "${k}" (keys: ${Object.keys(c.defaults).join(", ")})`,
      );
    }
    const want = typeof c.defaults[k];
    if (want === "number" && (typeof v !== "number" || !Number.isFinite(v))) {
      throw new ShapeError(`${c.files[0]}: shape key ${k} needs a number, got "${v}"`);
    }
    out[k] = want === "string" ? String(v) : v;
  }
  return out;
}

/** Parses "M=5,N=67,w=q3g32" (numbers where they parse). */
export function parseShape(text: string): Shape {
  const out: Shape = {};
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const m = /^([A-Za-z_][\w]*)=(.+)$/.exec(part);
    if (!m) throw new ShapeError(`shape "${part}": expected key=value`);
    const n = Number(m[2]);
    out[m[1]] = m[2].trim() !== "" && Number.isFinite(n) ? n : m[2];
  }
  return out;
}

/** Shape value as a number (ShapeError otherwise). */
export function num(s: Shape, k: string): number {
  const v = s[k];
  if (typeof v !== "number") throw new ShapeError(`shape key ${k} = "${v}" is not a number`);
  return v;
}

/** Shape value as a positive integer. */
export function int(s: Shape, k: string, min = 1): number {
  const v = num(s, k);
  if (!Number.isInteger(v) || v < min) {
    throw new ShapeError(`shape key ${k} = ${v}: need an integer ≥ ${min}`);
  }
  return v;
}

/** Shape value as one of `allowed`. */
export function oneOf<T extends string>(s: Shape, k: string, allowed: readonly T[]): T {
  const v = String(s[k]);
  if (!allowed.includes(v as T)) {
    throw new ShapeError(`shape key ${k} = "${v}": one of ${allowed.join(", ")}`);
  }
  return v as T;
}
