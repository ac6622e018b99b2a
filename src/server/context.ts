/**
 * What every route handler shares: the model host, metrics, configuration, and the request plumbing both
 * APIs need (a lease on the model for the request's lifetime, the client-disconnect signal, model names).
 * @module
 */
import { NotFoundError } from "../errors.ts";
import type { ModelHost, Served } from "./host.ts";
import type { Metrics } from "./metrics.ts";
import type { ProgressFeed } from "./progress.ts";
import { readJsonBody } from "./validate.ts";

export interface ServerConfig {
  /** Required on every route but /health when set (Bearer or x-api-key). */
  apiKey?: string;
  /** Request bodies above this many bytes get 413. */
  maxBodyBytes: number;
  /** A stream with nothing to send (a long prefill) sends a ping this often (default 10 s). */
  keepAliveMs?: number;
  /** Other names accepted in `model` (a `*` matches anything); only consulted with `strictModelName`. */
  aliases: string[];
  /** Refuse a `model` that is not the served name or an alias (default: any name, as llama-server). */
  strictModelName?: boolean;
  /** Origins allowed to call the API from a browser (CORS); none by default. */
  cors?: string[];
  /** Resolves a name from /admin/load to a folder in the models directory (NotFound/Permission errors). */
  resolveModel?: (name: string) => Promise<string>;
}

export interface ServerCtx {
  host: ModelHost;
  metrics: Metrics;
  config: ServerConfig;
  progress: ProgressFeed;
}

function globMatch(pattern: string, s: string): boolean {
  const re = new RegExp(
    "^" + pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$",
  );
  return re.test(s);
}

/**
 * Any `model` name is served by the one model (responses carry its own name), unless the server runs with
 * --strict-model-name: then it must be the served one (by folder name) or match an alias.
 */
export function checkModel(ctx: ServerCtx, served: Served, requested: string): void {
  if (!ctx.config.strictModelName) return;
  if (requested === served.name || ctx.config.aliases.some((a) => globMatch(a, requested))) return;
  throw new NotFoundError(
    `model "${requested}" is not served here; this server serves "${served.name}"` +
      ` (start it with --alias '${requested}' to accept that name too)`,
    "model_not_found",
  );
}

/**
 * Runs `fn` with the model pinned and an AbortSignal for the client going away. A streaming handler calls
 * `hold()` to keep the lease past its return, and calls what `hold` returns when the stream ends.
 */
export async function withRequest<T>(
  ctx: ServerCtx,
  req: Request,
  fn: (
    a: { body: Record<string, unknown>; served: Served; abort: AbortController; hold: () => () => void },
  ) => Promise<T>,
): Promise<T> {
  const body = await readJsonBody(req, ctx.config.maxBodyBytes);
  const lease = await ctx.host.acquire();
  const abort = new AbortController();
  // Deno aborts the request's signal when the client disconnects; streams also abort from their body's
  // cancel (sse.ts).
  const onAbort = () => abort.abort();
  req.signal.addEventListener("abort", onAbort, { once: true });
  const release = () => {
    req.signal.removeEventListener("abort", onAbort);
    lease.release();
  };
  let held = false;
  try {
    const out = await fn({ body, served: lease.served, abort, hold: () => ((held = true), release) });
    if (!held) release();
    return out;
  } catch (e) {
    release(); // the lease is idempotent: safe even if a stream had been set up
    throw e;
  }
}
