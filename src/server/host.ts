/**
 * The served model: a model worker (engine and scheduler, which own the GPU) and a prompt worker (template,
 * tokenizer, grammars), both reached by messages so the HTTP thread never blocks. Requests hold a lease
 * while they run; a model swap closes the gate, waits for the leases to drain, loads the new model next to
 * the old one, and only then lets the old one go, so a failed load leaves the old model serving.
 * @module
 */
import type { SchedulerEvent } from "../engine/scheduler.ts";
import { ConflictError } from "../errors.ts";
import { ModelClient, PromptClient } from "./model_client.ts";
import type { ModelInfo, ModelLoadOptions, ModelStats } from "./worker_protocol.ts";

export interface Served {
  /** The name clients use in `model` (the folder name). */
  name: string;
  info: ModelInfo;
  model: ModelClient;
  prompts: PromptClient;
  /** The latest pool and queue figures. */
  readonly stats: ModelStats;
}

export type HostEvent = SchedulerEvent | { type: "model"; model: string; context_window: number };

export class ModelHost {
  readonly listeners = new Set<(e: HostEvent) => void>();
  #served: Served;
  #leases = 0;
  #drained: (() => void) | null = null;
  #gate: Promise<void> | null = null;
  #swapping = false;

  private constructor(served: Served, readonly opts: Omit<ModelLoadOptions, "dir">) {
    this.#served = served;
    this.#attach(served);
  }

  static async open(dir: string, opts: Omit<ModelLoadOptions, "dir">): Promise<ModelHost> {
    return new ModelHost(await ModelHost.#load({ ...opts, dir }), opts);
  }

  static async #load(opts: ModelLoadOptions): Promise<Served> {
    // The tokenizer loads while the weights do; a model that fails either way leaves no worker behind.
    const [model, prompts] = await Promise.allSettled([ModelClient.open(opts), PromptClient.open(opts.dir)]);
    if (model.status === "rejected" || prompts.status === "rejected") {
      if (model.status === "fulfilled") await model.value.close();
      if (prompts.status === "fulfilled") prompts.value.close();
      throw model.status === "rejected" ? model.reason : (prompts as PromiseRejectedResult).reason;
    }
    const m = model.value;
    return {
      name: m.info.name,
      info: m.info,
      model: m,
      prompts: prompts.value,
      get stats() {
        return m.stats;
      },
    };
  }

  get served(): Served {
    return this.#served;
  }
  get swapping(): boolean {
    return this.#swapping;
  }
  get inFlight(): number {
    return this.#leases;
  }

  /** Waits out a swap in progress, then pins the current model until `release`. */
  async acquire(): Promise<{ served: Served; release: () => void }> {
    while (this.#gate) await this.#gate;
    this.#leases++;
    let done = false;
    return {
      served: this.#served,
      release: () => {
        if (done) return;
        done = true;
        if (--this.#leases === 0) this.#drained?.();
      },
    };
  }

  /** Swaps in another model folder. In-flight requests finish first; a failed load keeps the old model. */
  async swap(dir: string, contextWindow?: number): Promise<Served> {
    if (this.#swapping) throw new ConflictError("a model swap is already in progress");
    this.#swapping = true;
    let open!: () => void;
    this.#gate = new Promise((r) => (open = r));
    try {
      if (this.#leases > 0) await new Promise<void>((r) => (this.#drained = r));
      this.#drained = null;
      const next = await ModelHost.#load({ ...this.opts, dir, contextWindow });
      const old = this.#served;
      this.#served = next;
      this.#attach(next);
      await ModelHost.#unload(old);
      this.#emit({ type: "model", model: next.name, context_window: next.info.contextWindow });
      return next;
    } finally {
      this.#swapping = false;
      this.#gate = null;
      open();
    }
  }

  async close(): Promise<void> {
    await ModelHost.#unload(this.#served);
  }

  static async #unload(s: Served): Promise<void> {
    s.prompts.close();
    await s.model.close();
  }

  #attach(s: Served): void {
    s.model.listeners.add((e) => this.#emit(e));
  }

  #emit(e: HostEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        console.error("[flint] event listener failed:", err);
      }
    }
  }
}
