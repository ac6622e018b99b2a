/**
 * Reading HF `config.json` fields with errors that name the file and field; RoPE frequency tables for the
 * scaling schemes (default, linear, llama3, yarn); MLX quantization settings with per-module overrides.
 * Architecture files build their own config from these helpers.
 * @module
 */
import { LoaderError } from "../errors.ts";

/** Typed accessors over one JSON object, failing with `file: field: what was expected`. */
export class ConfigReader {
  constructor(readonly file: string, readonly json: Record<string, any>) {
    if (!json || typeof json !== "object" || Array.isArray(json)) {
      throw new LoaderError(file, null, "expected a JSON object");
    }
  }
  has(key: string): boolean {
    return this.json[key] !== undefined && this.json[key] !== null;
  }
  int(key: string, fallback?: number): number {
    const v = this.json[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      throw new LoaderError(this.file, key, "required integer is missing");
    }
    if (!Number.isInteger(v) || v < 0) {
      throw new LoaderError(this.file, key, `expected a non-negative integer, got ${JSON.stringify(v)}`);
    }
    return v;
  }
  num(key: string, fallback?: number): number {
    const v = this.json[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      throw new LoaderError(this.file, key, "required number is missing");
    }
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new LoaderError(this.file, key, `expected a number, got ${JSON.stringify(v)}`);
    }
    return v;
  }
  bool(key: string, fallback?: boolean): boolean {
    const v = this.json[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      throw new LoaderError(this.file, key, "required boolean is missing");
    }
    if (typeof v !== "boolean") {
      throw new LoaderError(this.file, key, `expected true or false, got ${JSON.stringify(v)}`);
    }
    return v;
  }
  obj(key: string): ConfigReader | null {
    const v = this.json[key];
    if (v === undefined || v === null) return null;
    return new ConfigReader(`${this.file}: ${key}`, v);
  }
}

export interface RopeScaling {
  type: "default" | "linear" | "llama3" | "yarn";
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMax: number;
  betaFast: number;
  betaSlow: number;
  mscale: number;
  mscaleAllDim: number;
}

export interface RopeConfig {
  theta: number;
  /** Rotated dims (head_dim · partial_rotary_factor). */
  dims: number;
  scaling: RopeScaling | null;
}

const ROPE_TYPES = ["default", "linear", "llama3", "yarn"];

/** RoPE settings from top-level keys or the newer `rope_parameters` block (both are read). */
export function readRope(c: ConfigReader, headDim: number, defaultTheta: number): RopeConfig {
  const rp = c.obj("rope_parameters");
  const theta = rp?.has("rope_theta") ? rp.num("rope_theta") : c.num("rope_theta", defaultTheta);
  const partial = rp?.has("partial_rotary_factor")
    ? rp.num("partial_rotary_factor")
    : c.num("partial_rotary_factor", 1);
  const dims = Math.round(headDim * partial);
  if (dims % 2 !== 0 || dims > headDim) {
    throw new LoaderError(
      c.file,
      "partial_rotary_factor",
      `gives ${dims} rotary dims for head_dim ${headDim}`,
    );
  }
  // rope_scaling (older) or rope_parameters (newer, where rope_type "default" means none).
  const s = c.obj("rope_scaling") ?? rp;
  let scaling: RopeScaling | null = null;
  if (s) {
    const type = String(s.json.rope_type ?? s.json.type ?? "default");
    if (!ROPE_TYPES.includes(type)) {
      throw new LoaderError(
        s.file,
        "rope_type",
        `unsupported RoPE scaling "${type}"; supported: ${ROPE_TYPES.join(", ")}`,
      );
    }
    if (type !== "default") {
      scaling = {
        type: type as RopeScaling["type"],
        factor: s.num("factor"),
        lowFreqFactor: s.num("low_freq_factor", 1),
        highFreqFactor: s.num("high_freq_factor", 4),
        originalMax: s.num(
          "original_max_position_embeddings",
          type === "llama3" ? 8192 : c.num("max_position_embeddings", 4096),
        ),
        betaFast: s.num("beta_fast", 32),
        betaSlow: s.num("beta_slow", 1),
        mscale: s.num("mscale", 1),
        mscaleAllDim: s.num("mscale_all_dim", 0),
      };
    }
  }
  return { theta, dims, scaling };
}

/** inv_freq[i] for i < dims/2 after scaling, and the attention factor applied to q and k (YaRN). */
export function ropeTables(r: RopeConfig): { invFreq: Float32Array; mscale: number } {
  const half = r.dims / 2;
  const inv = new Float32Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(r.theta, (2 * i) / r.dims);
  const s = r.scaling;
  let mscale = 1;
  if (s?.type === "linear") {
    for (let i = 0; i < half; i++) inv[i] /= s.factor;
  } else if (s?.type === "llama3") {
    const lowWl = s.originalMax / s.lowFreqFactor;
    const highWl = s.originalMax / s.highFreqFactor;
    for (let i = 0; i < half; i++) {
      const wl = (2 * Math.PI) / inv[i];
      if (wl > lowWl) inv[i] = inv[i] / s.factor;
      else if (wl >= highWl) {
        const smooth = (s.originalMax / wl - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv[i] = (1 - smooth) * inv[i] / s.factor + smooth * inv[i];
      }
    }
  } else if (s?.type === "yarn") {
    const d = (rot: number) =>
      (r.dims * Math.log(s.originalMax / (rot * 2 * Math.PI))) / (2 * Math.log(r.theta));
    const low = Math.max(Math.floor(d(s.betaFast)), 0);
    const high = Math.min(Math.ceil(d(s.betaSlow)), r.dims - 1);
    for (let i = 0; i < half; i++) {
      const ramp = Math.min(Math.max((i - low) / (high === low ? 0.001 : high - low), 0), 1);
      inv[i] = (1 - ramp) * inv[i] + ramp * inv[i] / s.factor;
    }
    const m = (scale: number, ms: number) => (scale <= 1 ? 1 : 0.1 * ms * Math.log(scale) + 1);
    mscale = s.mscaleAllDim
      ? m(s.factor, s.mscale) / m(s.factor, s.mscaleAllDim)
      : m(s.factor, s.mscale || 1);
  }
  return { invFreq: inv, mscale };
}

export interface QuantSpec {
  mode: "affine";
  bits: number;
  groupSize: number;
}

export interface QuantConfig {
  default: QuantSpec;
  /** Per-module settings by module path (no ".weight"); `false` means left unquantized. */
  overrides: Map<string, QuantSpec | false>;
}

const QBITS = [2, 3, 4, 5, 6, 8];
const QGROUPS = [32, 64, 128];

function quantSpec(file: string, field: string, q: Record<string, any>, fallback?: QuantSpec): QuantSpec {
  const mode = q.mode ?? "affine";
  if (mode !== "affine") {
    throw new LoaderError(
      file,
      `${field}.mode`,
      `quantization mode "${mode}" is not supported (affine only)`,
    );
  }
  const bits = q.bits ?? fallback?.bits;
  const gs = q.group_size ?? fallback?.groupSize;
  if (!QBITS.includes(bits)) {
    throw new LoaderError(
      file,
      `${field}.bits`,
      `expected one of ${QBITS.join(", ")}, got ${JSON.stringify(bits)}`,
    );
  }
  if (!QGROUPS.includes(gs)) {
    throw new LoaderError(
      file,
      `${field}.group_size`,
      `expected one of ${QGROUPS.join(", ")}, got ${JSON.stringify(gs)}`,
    );
  }
  return { mode: "affine", bits, groupSize: gs };
}

/** MLX `quantization` (or `quantization_config`) block, or null for unquantized checkpoints. */
export function readQuant(c: ConfigReader): QuantConfig | null {
  const key = c.has("quantization")
    ? "quantization"
    : c.has("quantization_config")
    ? "quantization_config"
    : null;
  if (!key) return null;
  const q = c.json[key];
  if (typeof q !== "object") throw new LoaderError(c.file, key, "expected an object");
  if (q.quant_method && !["mlx", "affine"].includes(q.quant_method) && q.bits === undefined) {
    throw new LoaderError(
      c.file,
      `${key}.quant_method`,
      `"${q.quant_method}" checkpoints are not supported; use MLX affine quantization`,
    );
  }
  const def = quantSpec(c.file, key, q);
  const overrides = new Map<string, QuantSpec | false>();
  for (const [k, v] of Object.entries(q)) {
    if (["group_size", "bits", "mode", "quant_method"].includes(k)) continue;
    if (v === false) overrides.set(k, false);
    else if (v && typeof v === "object") {
      overrides.set(k, quantSpec(c.file, `${key}.${k}`, v as Record<string, any>, def));
    }
  }
  return { default: def, overrides };
}

/**
 * EOS ids: the union of generation_config.json, config.json and its `text_config` (multimodal wrappers keep
 * the text model's there); each may be an int or a list.
 */
export function readEos(config: Record<string, any>, generation: Record<string, any> | null): number[] {
  const ids = new Set<number>();
  for (const src of [generation, config, config.text_config]) {
    const v = src?.eos_token_id;
    if (Number.isInteger(v)) ids.add(v);
    else if (Array.isArray(v)) { for (const x of v) if (Number.isInteger(x)) ids.add(x); }
  }
  return [...ids];
}
