/**
 * The only place that knows whether we run under Deno or in a browser: GPU adapter acquisition, shader
 * sources, and model files. Everything else takes a `ModelSource` and a `GPUDevice`.
 * @module
 */
import { DeviceError } from "../errors.ts";

/** True under Deno (server, CLI, tests); false in a browser tab. */
export const isDeno: boolean = typeof (globalThis as any).Deno !== "undefined";

/** Random access to the files of one model folder, wherever they live (disk, File objects, IndexedDB). */
export interface ModelSource {
  /** Human-readable location, used in error messages. */
  readonly name: string;
  /** File names directly in the folder. */
  list(): Promise<string[]>;
  /** Byte size of a file, or null when it does not exist. */
  size(file: string): Promise<number | null>;
  /** `length` bytes of `file` from `offset`, read into `into` when given (avoids a second copy). */
  read(file: string, offset: number, length: number, into?: Uint8Array): Promise<Uint8Array>;
  /** Whole file as text (configs, tokenizer). */
  readText(file: string): Promise<string>;
}

let shaderBase: URL | string = new URL("../../wgsl/", import.meta.url);

/** Where `wgsl/` lives; the static web build points this at its copy of the folder. */
export function setShaderBase(base: URL | string): void {
  shaderBase = base;
}

const shaderCache = new Map<string, Promise<string>>();

/** Text of `wgsl/<name>` (e.g. "rms_norm.wgsl" or "lib/quant.wgsl"). */
export function shaderSource(name: string): Promise<string> {
  let p = shaderCache.get(name);
  if (!p) {
    const url = new URL(name, shaderBase);
    p = isDeno && url.protocol === "file:"
      ? (globalThis as any).Deno.readTextFile(url)
      : fetch(url).then((r) => {
        if (!r.ok) throw new DeviceError(`shader ${name}: HTTP ${r.status} from ${url}`);
        return r.text();
      });
    shaderCache.set(name, p!);
  }
  return p!;
}

/** Overrides a shader's text (kernel lab: an edited shader is run through the same wrapper). */
export function overrideShaderSource(name: string, text: string | null): void {
  if (text === null) shaderCache.delete(name);
  else shaderCache.set(name, Promise.resolve(text));
}

/** Which WebGPU implementation runs the engine: Deno's own (wgpu), Dawn's (dawn.node), or a browser's. */
export type WebGpuImpl = "deno" | "dawn" | "browser";

/**
 * What `--webgpu` asks for: `auto` (the CLIs' default) takes Dawn where it loads and offers the matrix units
 * Flint's kernels use (f16 16×16×16, subgroups of 32), else Deno's.
 */
export type WebGpuChoice = "deno" | "dawn" | "auto";

/** One shape of matrix-unit product the adapter offers (Dawn's `subgroupMatrixConfigs`): M×N×K. */
export interface SubgroupMatrixConfig {
  M: number;
  N: number;
  K: number;
  componentType: string;
  resultComponentType: string;
}

// Dawn's configs are objects whose fields are getters (a spread or JSON shows none): read them by name.
export function matrixConfigs(ai: GPUAdapterInfo): SubgroupMatrixConfig[] {
  const list = (ai as unknown as { subgroupMatrixConfigs?: Record<string, unknown>[] }).subgroupMatrixConfigs;
  return (list ?? []).map((c) => ({
    M: Number(c.M),
    N: Number(c.N),
    K: Number(c.K),
    componentType: String(c.componentType),
    resultComponentType: String(c.resultComponentType),
  }));
}

/**
 * Whether Flint's matrix-unit kernels can run: f16 × f16 → f32 16×16×16 matrices (NVIDIA's tensor cores) and
 * subgroups of exactly 32.
 */
export function matrixKernelsRun(
  configs: readonly SubgroupMatrixConfig[],
  subgroupMinSize: number | undefined,
  subgroupMaxSize: number | undefined,
): boolean {
  return subgroupMinSize === 32 && subgroupMaxSize === 32 &&
    configs.some((c) =>
      c.M === 16 && c.N === 16 && c.K === 16 && c.componentType === "f16" && c.resultComponentType === "f32"
    );
}

/**
 * Whether a matrix-unit kernel taking `workgroupBytes` of workgroup memory runs on this device: shader-f16,
 * subgroups, and `matrixKernelsRun`.
 */
export function matrixKernelsFit(
  info: {
    f16: boolean;
    subgroups: boolean;
    subgroupMatrix: readonly SubgroupMatrixConfig[];
    subgroupMinSize?: number;
    subgroupMaxSize?: number;
    maxWorkgroupStorage: number;
  },
  workgroupBytes: number,
): boolean {
  return info.f16 && info.subgroups &&
    matrixKernelsRun(info.subgroupMatrix, info.subgroupMinSize, info.subgroupMaxSize) &&
    info.maxWorkgroupStorage >= workgroupBytes;
}

/**
 * The implementation of code that does not choose one (the library, the tests): `FLINT_WEBGPU` (deno, dawn or
 * auto), so the test suite runs on Dawn with `FLINT_WEBGPU=dawn`; else Deno's.
 */
export function defaultWebGpu(): WebGpuChoice {
  const v = isDeno ? (globalThis as any).Deno.env.get("FLINT_WEBGPU") : undefined;
  if (!v) return "deno";
  if (v === "deno" || v === "dawn" || v === "auto") return v;
  throw new DeviceError(`FLINT_WEBGPU=${v}: expected deno, dawn or auto`);
}

/**
 * The high-performance adapter of the chosen implementation (browsers: their own, whatever the choice) and
 * which one it is, or a DeviceError that says what is missing.
 */
export async function requestAdapter(
  choice: WebGpuChoice = defaultWebGpu(),
  dawnFlags: string[] = [],
): Promise<{ adapter: GPUAdapter; gpu: GPU; impl: WebGpuImpl }> {
  if (isDeno && choice !== "deno") {
    const { dawnGpu } = await import("./dawn.ts");
    try {
      const gpu = await dawnGpu(dawnFlags);
      const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
      const info = adapter?.info as (GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number });
      const matrices = adapter?.features.has("chromium-experimental-subgroup-matrix" as GPUFeatureName) &&
        matrixKernelsRun(matrixConfigs(info), info.subgroupMinSize, info.subgroupMaxSize);
      if (adapter && (choice === "dawn" || matrices)) return { adapter, gpu, impl: "dawn" };
      if (choice === "dawn") throw new DeviceError("--webgpu dawn: Dawn found no usable adapter");
    } catch (e) {
      if (choice === "dawn") throw e;
    }
  }
  const gpu = (globalThis.navigator as any)?.gpu as GPU | undefined;
  if (!gpu) {
    throw new DeviceError(
      isDeno
        ? "WebGPU is not available in this Deno build"
        : "this browser has no WebGPU (navigator.gpu is missing); use a recent Chrome, Edge or Safari",
    );
  }
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) {
    throw new DeviceError(
      "no WebGPU adapter found" +
        (isDeno
          ? " (on Linux without a GPU, install mesa-vulkan-drivers for the lavapipe software adapter)"
          : ""),
    );
  }
  return { adapter, gpu, impl: isDeno ? "deno" : "browser" };
}
