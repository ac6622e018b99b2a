/**
 * Device acquisition: the features and limits an LLM needs, asked for explicitly (Deno hands out the spec
 * defaults otherwise: 128 MiB bindings), with fallbacks when `shader-f16` or subgroups are missing.
 * @module
 */
import { DeviceError } from "../errors.ts";
import {
  matrixConfigs,
  requestAdapter,
  type SubgroupMatrixConfig,
  type WebGpuChoice,
  type WebGpuImpl,
} from "../platform/mod.ts";
import { KernelCache } from "./kernel.ts";
import { MemoryLedger } from "./memory.ts";
import type { Defines } from "./preprocess.ts";
import { applyProfile, defaultProfile, type KernelProfile, type ProfileOverrides } from "./profile.ts";

export interface GpuOptions {
  /** Use f16 activations when the adapter has `shader-f16` (default true). false forces the f32 path. */
  f16?: boolean;
  /** Use subgroup operations when the device grants them (default true). */
  subgroups?: boolean;
  /** Changes to the kernel profile chosen for the adapter (src/gpu/profile.ts). */
  profile?: ProfileOverrides;
  /** The WebGPU implementation under Deno (default `deno`; browsers always use their own). */
  webgpu?: WebGpuChoice;
  /** More dawn.node flags (`backend=null`: Tint compiles every kernel, nothing runs; the tests). */
  dawnFlags?: string[];
}

export type { SubgroupMatrixConfig };

export interface GpuInfo {
  adapter: string;
  /** The WebGPU implementation the device comes from. */
  webgpu: WebGpuImpl;
  /** Matrix-unit shapes the device was opened with (empty: none offered, or not Dawn). */
  subgroupMatrix: SubgroupMatrixConfig[];
  f16: boolean;
  subgroups: boolean;
  subgroupMinSize: number;
  subgroupMaxSize: number;
  timestamps: boolean;
  maxBinding: number;
  maxBuffer: number;
  maxWorkgroupStorage: number;
  /** Storage buffers one kernel may bind (browsers: often 10). */
  maxStorageBuffers: number;
  maxInvocations: number;
  uniformAlign: number;
  storageAlign: number;
  /**
   * WGSL has `dot4I8Packed` (language feature packed_4x8_integer_dot_product): the int8-x matmuls need it.
   */
  int8Dot: boolean;
}

/**
 * A device plus everything shared by all kernels on it: pipeline cache, memory ledger, feature defines, and
 * the kernel profile the host wrappers read.
 */
export class Gpu {
  readonly kernels: KernelCache;
  readonly memory: MemoryLedger;
  /** Defines every shader sees: F16 (activations in f16), SUBGROUPS, and the directive switches. */
  readonly defines: Defines;
  readonly #errors: string[];

  private constructor(
    readonly device: GPUDevice,
    readonly info: GpuInfo,
    /** Kernel shape choices for this device (src/gpu/profile.ts). */
    readonly profile: KernelProfile,
    same?: Gpu,
  ) {
    if (same) {
      // Another profile over the same device: caches, ledger and error list are shared.
      this.memory = same.memory;
      this.defines = same.defines;
      this.kernels = same.kernels;
      this.#errors = same.#errors;
      return;
    }
    this.#errors = [];
    this.memory = new MemoryLedger(device);
    this.defines = {};
    if (info.f16) this.defines.F16 = 1;
    if (info.subgroups) this.defines.SUBGROUPS = 1;
    // naga (Deno's WebGPU) rejects `enable subgroups;` while Dawn (Chrome, dawn.node) requires it.
    if (info.subgroups && info.webgpu !== "deno") this.defines.SUBGROUPS_DIRECTIVE = 1;
    this.kernels = new KernelCache(this);
    device.addEventListener("uncapturederror", (e: any) => {
      const msg = String(e?.error?.message ?? e);
      this.#errors.push(msg);
      console.error(`[flint] WebGPU error: ${msg}`);
    });
  }

  /** Opens the adapter's device with large limits and the optional features we can use. */
  static async create(opts: GpuOptions = {}): Promise<Gpu> {
    const { adapter, gpu, impl } = await requestAdapter(opts.webgpu, opts.dawnFlags);
    const matrixFeature = "chromium-experimental-subgroup-matrix" as GPUFeatureName;
    const matrices = impl === "dawn" && adapter.features.has(matrixFeature);
    const wantF16 = opts.f16 !== false && adapter.features.has("shader-f16");
    const timestamps = adapter.features.has("timestamp-query");
    const L = adapter.limits;
    const requiredLimits: Record<string, number> = {
      maxStorageBufferBindingSize: L.maxStorageBufferBindingSize,
      maxBufferSize: L.maxBufferSize,
      maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: L.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: L.maxComputeWorkgroupSizeX,
      maxStorageBuffersPerShaderStage: L.maxStorageBuffersPerShaderStage,
    };
    const base: GPUFeatureName[] = [];
    if (wantF16) base.push("shader-f16");
    if (timestamps) base.push("timestamp-query");
    if (matrices) base.push(matrixFeature);
    let device: GPUDevice | null = null;
    let subgroups = false;
    // Deno does not list "subgroups" in adapter.features, yet grants it on request: so just try.
    if (opts.subgroups !== false) {
      try {
        device = await adapter.requestDevice({
          requiredFeatures: [...base, "subgroups" as GPUFeatureName],
          requiredLimits,
        });
        subgroups = device.features.has("subgroups");
      } catch {
        device = null;
      }
    }
    if (!device) {
      try {
        device = await adapter.requestDevice({ requiredFeatures: base, requiredLimits });
      } catch (e) {
        throw new DeviceError(`could not open the WebGPU device: ${(e as Error).message}`);
      }
    }
    const ai = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
    const dl = device.limits;
    const info: GpuInfo = {
      // Dawn's description is the driver's version; its device names the GPU.
      adapter: (impl === "dawn" ? ai.device : "") || ai.description ||
        `${ai.vendor} ${ai.architecture} ${ai.device}`.trim() || "unknown adapter",
      webgpu: impl,
      subgroupMatrix: matrices ? matrixConfigs(ai) : [],
      f16: wantF16,
      subgroups,
      subgroupMinSize: ai.subgroupMinSize ?? 0,
      subgroupMaxSize: ai.subgroupMaxSize ?? 0,
      timestamps,
      maxBinding: dl.maxStorageBufferBindingSize,
      maxBuffer: dl.maxBufferSize,
      maxWorkgroupStorage: dl.maxComputeWorkgroupStorageSize,
      maxStorageBuffers: dl.maxStorageBuffersPerShaderStage,
      maxInvocations: dl.maxComputeInvocationsPerWorkgroup,
      uniformAlign: dl.minUniformBufferOffsetAlignment,
      storageAlign: dl.minStorageBufferOffsetAlignment,
      int8Dot: gpu.wgslLanguageFeatures?.has("packed_4x8_integer_dot_product") ?? false,
    };
    device.lost.then((l) => {
      if (l.reason !== "destroyed") console.error(`[flint] WebGPU device lost: ${l.message}`);
    });
    let profile: KernelProfile;
    try {
      profile = applyProfile(defaultProfile(info), opts.profile ?? {});
    } catch (e) {
      device.destroy();
      throw e;
    }
    return new Gpu(device, info, profile);
  }

  /** The same device under this profile with `overrides` applied (a lab run, a test, an A/B). */
  withProfile(overrides: ProfileOverrides): Gpu {
    return new Gpu(this.device, this.info, applyProfile(this.profile, overrides), this);
  }

  /** Validation errors seen since the last call (tests assert there are none). */
  takeErrors(): string[] {
    return this.#errors.splice(0);
  }

  destroy(): void {
    this.device.destroy();
  }
}
