/**
 * One owner for every GPU buffer: bytes are tracked by category so /health, the context-window fit, the
 * memory guard and the benchmark all read the same numbers.
 * @module
 */

export type MemoryCategory = "weights" | "kv" | "activations" | "staging" | "params" | "other";

export class MemoryLedger {
  #bytes: Record<MemoryCategory, number> = {
    weights: 0,
    kv: 0,
    activations: 0,
    staging: 0,
    params: 0,
    other: 0,
  };
  #peak = 0;
  #owners = new WeakMap<GPUBuffer, { category: MemoryCategory; size: number }>();

  constructor(readonly device: GPUDevice) {}

  /** Creates a buffer and books its size under `category`. */
  create(category: MemoryCategory, desc: GPUBufferDescriptor): GPUBuffer {
    const buf = this.device.createBuffer(desc);
    this.#owners.set(buf, { category, size: desc.size });
    this.#bytes[category] += desc.size;
    this.#peak = Math.max(this.#peak, this.total);
    return buf;
  }

  /** Destroys a buffer made by `create` and returns its bytes to the ledger. */
  destroy(buf: GPUBuffer): void {
    const o = this.#owners.get(buf);
    if (o) {
      this.#bytes[o.category] -= o.size;
      this.#owners.delete(buf);
    }
    buf.destroy();
  }

  get total(): number {
    return Object.values(this.#bytes).reduce((a, b) => a + b, 0);
  }
  get peak(): number {
    return this.#peak;
  }
  bytes(category: MemoryCategory): number {
    return this.#bytes[category];
  }
  snapshot(): Record<MemoryCategory | "total" | "peak", number> {
    return { ...this.#bytes, total: this.total, peak: this.#peak };
  }
}
