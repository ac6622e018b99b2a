/**
 * Per-sequence GPU state for the CPU-free decode loop: sampling parameters, {pos, limit, done}, and the token
 * history that steps read their input from and the sampler writes to. Slots are handed out by the scheduler.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import type { SlotBuffers } from "../ops/sample.ts";

export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  /** 0 = off. */
  topK: number;
  /** 1 = off. */
  topP: number;
  /** 0 = off. */
  minP: number;
  seed: number;
  /** OpenAI frequency/presence penalties over the last 64 tokens (sample.wgsl); 0 or absent = off. */
  frequencyPenalty?: number;
  presencePenalty?: number;
}

export const GREEDY: SamplingParams = { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0 };

export class Slots implements SlotBuffers {
  readonly sampling: GPUBuffer;
  readonly slots: GPUBuffer;
  readonly hist: GPUBuffer;
  readonly eos: GPUBuffer;
  #free: number[];

  constructor(readonly gpu: Gpu, readonly count: number, readonly ctx: number, eosIds: number[]) {
    const mk = (label: string, size: number, extra = 0) =>
      gpu.memory.create("activations", {
        label,
        size: Math.max(16, size),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC | extra,
      });
    this.sampling = mk("slot_sampling", count * 32);
    this.slots = mk("slot_state", count * 16);
    this.hist = mk("token_hist", count * ctx * 4);
    this.eos = mk("eos", (1 + eosIds.length) * 4);
    gpu.device.queue.writeBuffer(this.eos, 0, new Uint32Array([eosIds.length, ...eosIds]));
    this.#free = Array.from({ length: count }, (_, i) => count - 1 - i);
  }

  get free(): number {
    return this.#free.length;
  }

  acquire(): number | null {
    return this.#free.pop() ?? null;
  }

  release(slot: number): void {
    this.#free.push(slot);
  }

  /**
   * Starts a sequence in `slot`: its prompt ids go to the history, its state to {pos: 0, limit, done: 0}.
   * Queue-ordered writes, so they land after any earlier GPU work that still touches the slot.
   */
  start(slot: number, prompt: number[], limit: number, p: SamplingParams): void {
    const q = this.gpu.device.queue;
    q.writeBuffer(this.hist, slot * this.ctx * 4, new Uint32Array(prompt));
    q.writeBuffer(this.slots, slot * 16, new Uint32Array([0, limit, 0, 0]));
    const sp = new DataView(new ArrayBuffer(32));
    sp.setFloat32(0, p.temperature, true);
    sp.setUint32(4, p.topK, true);
    sp.setFloat32(8, p.topP, true);
    sp.setFloat32(12, p.minP, true);
    sp.setUint32(16, p.seed >>> 0, true);
    sp.setFloat32(20, p.frequencyPenalty ?? 0, true);
    sp.setFloat32(24, p.presencePenalty ?? 0, true);
    q.writeBuffer(this.sampling, slot * 32, sp.buffer);
  }
}
