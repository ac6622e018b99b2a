/**
 * Prometheus text exposition (format 0.0.4) without a client library: counters and histograms fed by
 * requests and finished generations; gauges, and the counters the model worker keeps (the prefix cache's),
 * read from the served model's latest report when scraped.
 * @module
 */
import type { GenerationResult } from "../engine/scheduler.ts";
import type { ModelHost } from "./host.ts";
import type { PrefixCacheReport } from "./worker_protocol.ts";

type Labels = Record<string, string>;

function labelText(l: Labels): string {
  const parts = Object.entries(l).map(([k, v]) =>
    `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`
  );
  return parts.length ? `{${parts.join(",")}}` : "";
}

class Counter {
  readonly #values = new Map<string, { labels: Labels; v: number }>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1): void {
    const k = labelText(labels);
    const e = this.#values.get(k) ?? { labels, v: 0 };
    e.v += by;
    this.#values.set(k, e);
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    if (!this.#values.size) lines.push(`${this.name} 0`);
    for (const e of this.#values.values()) lines.push(`${this.name}${labelText(e.labels)} ${e.v}`);
    return lines.join("\n");
  }
}

class Histogram {
  readonly #counts: number[];
  #sum = 0;
  #n = 0;
  constructor(readonly name: string, readonly help: string, readonly bounds: number[]) {
    this.#counts = bounds.map(() => 0);
  }
  observe(v: number): void {
    if (!Number.isFinite(v)) return;
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]) this.#counts[i]++;
    this.#sum += v;
    this.#n++;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.bounds.forEach((b, i) => lines.push(`${this.name}_bucket{le="${b}"} ${this.#counts[i]}`));
    lines.push(
      `${this.name}_bucket{le="+Inf"} ${this.#n}`,
      `${this.name}_sum ${this.#sum}`,
      `${this.name}_count ${this.#n}`,
    );
    return lines.join("\n");
  }
}

/** A metric read from an absolute value when scraped: a gauge, or a counter the model worker keeps. */
function sample(type: "gauge" | "counter", name: string, help: string, values: [Labels, number][]): string {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  for (const [l, v] of values) lines.push(`${name}${labelText(l)} ${v}`);
  return lines.join("\n");
}

function gauge(name: string, help: string, values: [Labels, number][]): string {
  return sample("gauge", name, help, values);
}

const RATE_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

export class Metrics {
  readonly requests = new Counter("flint_requests_total", "HTTP requests by route and status.");
  readonly generations = new Counter("flint_generations_total", "Finished generations by finish reason.");
  readonly promptTokens = new Counter("flint_prompt_tokens_total", "Prompt tokens of finished generations.");
  readonly completionTokens = new Counter("flint_completion_tokens_total", "Generated tokens.");
  readonly ttft = new Histogram("flint_time_to_first_token_seconds", "Time from submit to the first token.", [
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
  ]);
  readonly prefill = new Histogram(
    "flint_prefill_tokens_per_second",
    "Prompt tokens per second until the first token.",
    RATE_BUCKETS,
  );
  readonly decode = new Histogram(
    "flint_decode_tokens_per_second",
    "Generated tokens per second after the first.",
    RATE_BUCKETS,
  );

  request(route: string, status: number): void {
    this.requests.inc({ route, status: String(status) });
  }

  generation(r: GenerationResult): void {
    this.generations.inc({ reason: r.finishReason });
    this.promptTokens.inc({}, r.promptTokens);
    this.completionTokens.inc({}, r.completionTokens);
    if (r.finishReason === "cancelled" || r.finishReason === "error" || !r.ttftMs) return;
    this.ttft.observe(r.ttftMs / 1000);
    if (r.prefillTps) this.prefill.observe(r.prefillTps);
    if (r.decodeTps) this.decode.observe(r.decodeTps);
  }

  render(host: ModelHost): string {
    const { info, stats, name } = host.served;
    const mem = stats.memory;
    const m = { model: name };
    const pc = stats.prefixCache;
    return [
      this.requests.render(),
      this.generations.render(),
      this.promptTokens.render(),
      this.completionTokens.render(),
      this.ttft.render(),
      this.prefill.render(),
      this.decode.render(),
      gauge("flint_kv_pages_used", "KV cache pages held by running requests.", [[m, stats.usedPages]]),
      gauge("flint_kv_pages_cached", "KV cache pages held by the prefix cache alone.", [[
        m,
        stats.cachedPages,
      ]]),
      gauge("flint_kv_pages_total", "KV cache pages in the pool.", [[m, info.kvPages]]),
      gauge("flint_kv_used_bytes", "KV cache bytes held by running requests.", [[
        m,
        stats.usedPages * info.kvPageBytes,
      ]]),
      ...prefixCacheMetrics(m, pc, info.kvPageBytes),
      gauge("flint_queue_depth", "Requests waiting for a sequence slot.", [[m, stats.queued]]),
      gauge("flint_running_sequences", "Sequences being prefilled or decoded.", [[m, stats.running]]),
      gauge("flint_requests_in_flight", "HTTP requests holding the model.", [[m, host.inFlight]]),
      gauge("flint_context_window_tokens", "Context window of the served model.", [[
        m,
        info.contextWindow,
      ]]),
      gauge(
        "flint_gpu_memory_bytes",
        "GPU memory by category.",
        (["weights", "kv", "activations", "staging", "params", "other"] as const).map((
          c,
        ) => [{ ...m, category: c }, mem[c]]),
      ),
    ].join("\n") + "\n";
  }
}

/** The prefix cache's figures from the worker's latest report (zeros while it is off). */
function prefixCacheMetrics(m: Labels, pc: PrefixCacheReport | null, pageBytes: number): string[] {
  const counter = (name: string, help: string, v: number) =>
    sample("counter", `flint_prefix_cache_${name}_total`, help, [[m, v]]);
  const g = (name: string, help: string, v: number) => gauge(`flint_prefix_cache_${name}`, help, [[m, v]]);
  return [
    counter("hits", "Prompts that reused cached KV pages.", pc?.hits ?? 0),
    counter("misses", "Prompts that found no cached KV pages.", pc?.misses ?? 0),
    counter(
      "tokens_reused",
      "Prompt tokens taken from the prefix cache instead of prefilled.",
      pc?.tokensReused ?? 0,
    ),
    counter("tokens_loaded", "Of the reused tokens, those loaded from disk.", pc?.tokensLoaded ?? 0),
    counter("evictions", "Cached KV pages evicted from memory.", pc?.evictions ?? 0),
    g("bytes", "Bytes of KV pages held by the prefix cache in memory.", (pc?.pages ?? 0) * pageBytes),
    g(
      "budget_bytes",
      "Bytes of KV pages the prefix cache may keep in memory.",
      (pc?.budgetPages ?? 0) * pageBytes,
    ),
    g("disk_bytes", "Bytes of KV pages the prefix cache keeps on disk.", pc?.diskBytes ?? 0),
  ];
}
