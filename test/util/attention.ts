/**
 * Helpers of the attention tests (test/ops/attention_*_test.ts): the device under decode- or
 * prefill-attention profile changes.
 * @module
 */
import type { Gpu } from "../../src/gpu/device.ts";
import type { DecodeAttentionProfile, PrefillAttentionProfile } from "../../src/gpu/profile.ts";

/** The device under decode-attention profile changes. */
export const decode = (gpu: Gpu, d: Partial<DecodeAttentionProfile>): Gpu =>
  gpu.withProfile({ decodeAttention: d });
/** The device under prefill-attention profile changes. */
export const prefill = (gpu: Gpu, p: Partial<PrefillAttentionProfile>): Gpu =>
  gpu.withProfile({ prefillAttention: p });
