/**
 * The kernel profile (src/gpu/profile.ts): defaults follow the adapter's features and limits, overrides are
 * checked field by field, and `Gpu.withProfile` gives the same device under another profile without
 * touching the first.
 */
import { describe, expect, test } from "vitest";
import { ValidationError } from "../../src/errors.ts";
import type { GpuInfo } from "../../src/gpu/device.ts";
import { applyProfile, defaultProfile, TUNED } from "../../src/gpu/profile.ts";
import { devices } from "../util/lab.ts";

const { on } = devices();

const full: GpuInfo = {
  adapter: "test",
  webgpu: "deno",
  subgroupMatrix: [],
  f16: true,
  subgroups: true,
  subgroupMinSize: 32,
  subgroupMaxSize: 32,
  timestamps: true,
  maxBinding: 2 ** 31,
  maxBuffer: 2 ** 40,
  maxWorkgroupStorage: 49152,
  maxStorageBuffers: 16,
  maxInvocations: 1024,
  uniformAlign: 256,
  storageAlign: 256,
  int8Dot: true,
};

describe("kernel profile", () => {
  test(
    "defaults: the measured values, with what the adapter cannot run switched off and sizes " +
      "capped",
    () => {
      const p = defaultProfile(full);
      expect({ ...p, adapter: undefined }).toEqual({ ...structuredClone(TUNED), adapter: undefined });
      const bare = defaultProfile({
        ...full,
        f16: false,
        subgroups: false,
        subgroupMinSize: 0,
        subgroupMaxSize: 0,
        maxInvocations: 256,
      });
      expect(bare.matmul.vectorInt8.enabled).toBe(false);
      expect(bare.matmul.tiled.int8).toBe(false);
      expect(bare.decodeAttention.fourKeysPerStep).toBe(false);
      expect(bare.decodeAttention.combineWorkgroupSize).toBe(256);
      expect(bare.prefillAttention.quad).toBe(false);
      expect(bare.prefillAttention.f16QK).toBe(false);
      // Subgroups of varying size rule out int8 x only.
      const varying = defaultProfile({ ...full, subgroupMinSize: 8 });
      expect([varying.matmul.tiled.int8, varying.decodeAttention.fourKeysPerStep]).toEqual([false, true]);
    },
  );

  test("overrides change only the fields given; unknown fields and wrong types are refused", () => {
    const base = defaultProfile(full);
    const p = applyProfile(base, {
      decodeAttention: { keysPerSplit: 128 },
      matmul: { tiled: { splitK: 3 } },
    });
    expect(p.decodeAttention.keysPerSplit).toBe(128);
    expect(p.matmul.tiled.splitK).toBe(3);
    expect(p.matmul.tiled.wideN).toBe(base.matmul.tiled.wideN);
    expect(base.decodeAttention.keysPerSplit).toBe(TUNED.decodeAttention.keysPerSplit);
    expect(() => applyProfile(base, { decodeAttention: { split: 64 } } as never)).toThrow(ValidationError);
    expect(() => applyProfile(base, { matmul: { tiled: { int8: 1 } } } as never)).toThrow(
      /must be a boolean/,
    );
    expect(() => applyProfile(base, { matmul: 3 } as never)).toThrow(/group of fields/);
    expect(Object.isFrozen(TUNED.matmul.tiled)).toBe(true);
  });

  test(
    "withProfile: the same device and caches under the changed profile; the original keeps its own",
    on("f32", async (gpu) => {
      const g = gpu.withProfile({ prefillAttention: { quad: false } });
      expect(g.device).toBe(gpu.device);
      expect(g.kernels).toBe(gpu.kernels);
      expect(g.memory).toBe(gpu.memory);
      expect(g.profile.prefillAttention.quad).toBe(false);
      expect(gpu.profile.prefillAttention.keysPerTile).toBe(g.profile.prefillAttention.keysPerTile);
      expect(g.withProfile({}).profile).toEqual(g.profile);
      await Promise.resolve();
    }),
  );
});
