/**
 * The Hono app: request-size limits, CORS (when configured), the API key check on the API routes,
 * per-route request metrics, the OpenAI and Anthropic routes, health, metrics,
 * events, admin, and the web playground if `web_routes.ts` is there. Every error, thrown anywhere below,
 * becomes a response in one place: `onError` → errors.ts.
 * @module
 */
import { Hono } from "hono";
import { cors } from "hono/cors";
import { AuthenticationError, HeadersTooLargeError, NotFoundError, UriTooLongError } from "../errors.ts";
import { adminRoutes } from "./admin.ts";
import { anthropicRoutes } from "./anthropic.ts";
import type { ServerConfig, ServerCtx } from "./context.ts";
import { errorResponse } from "./errors.ts";
import { eventsResponse } from "./events.ts";
import type { ModelHost } from "./host.ts";
import { Metrics } from "./metrics.ts";
import { openaiRoutes } from "./openai.ts";
import { ProgressFeed } from "./progress.ts";
import { responsesRoutes } from "./responses.ts";
import type { PrefixCacheReport } from "./worker_protocol.ts";

/**
 * Below the runtime's own limit (~64 KiB for the whole request head, answered with an empty 400), so a
 * client that goes over ours learns why.
 */
const MAX_URL_BYTES = 8 * 1024;
const MAX_HEADER_BYTES = 32 * 1024;

const ROUTES = new Set([
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/models",
  "/v1/messages",
  "/v1/messages/count_tokens",
  "/health",
  "/metrics",
  "/events",
  "/admin/load",
]);

/** Constant-time string comparison (the key check must not leak its prefix through timing). */
function sameKey(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let d = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) d |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return d === 0;
}

/** Routes that need the API key: the APIs. The pages (/, /lab, their files) ask for the key themselves. */
function needsKey(path: string): boolean {
  return /^\/(v1|metrics|events|admin)(\/|$)/.test(path);
}

function presentedKey(req: Request): string | null {
  const auth = req.headers.get("authorization");
  if (auth?.toLowerCase().startsWith("bearer ")) return auth.slice(7).trim();
  return req.headers.get("x-api-key");
}

/** /health's prefix cache figures: memory (pages the cache holds, budget), counters since load, disk. */
function prefixCacheBody(pc: PrefixCacheReport | null, pageBytes: number): Record<string, unknown> {
  return {
    enabled: pc !== null,
    pages: pc?.pages ?? 0,
    bytes: (pc?.pages ?? 0) * pageBytes,
    budget_bytes: (pc?.budgetPages ?? 0) * pageBytes,
    idle_pages: pc?.idlePages ?? 0,
    hits: pc?.hits ?? 0,
    misses: pc?.misses ?? 0,
    tokens_reused: pc?.tokensReused ?? 0,
    tokens_loaded: pc?.tokensLoaded ?? 0,
    evictions: pc?.evictions ?? 0,
    disk: { dir: pc?.dir ?? null, bytes: pc?.diskBytes ?? 0, budget_bytes: pc?.diskBudgetBytes ?? 0 },
  };
}

export function healthBody(host: ModelHost): Record<string, unknown> {
  const { info, stats, name, model } = host.served;
  return {
    status: model.failure ? "failed" : host.swapping ? "loading" : "ok",
    ...(model.failure ? { error: model.failure } : {}),
    model: name,
    context_window: info.contextWindow,
    adapter: info.adapter,
    webgpu: info.webgpu,
    kv: {
      used_pages: stats.usedPages,
      cached_pages: stats.cachedPages,
      free_pages: stats.freePages,
      total_pages: info.kvPages,
      bytes_per_page: info.kvPageBytes,
      used_bytes: stats.usedPages * info.kvPageBytes,
      cached_bytes: stats.cachedPages * info.kvPageBytes,
    },
    prefix_cache: prefixCacheBody(stats.prefixCache, info.kvPageBytes),
    queue_depth: stats.queued,
    running: stats.running,
    in_flight: host.inFlight,
    // Share of prefill done by the CPU; null until CPU co-prefill exists.
    cpu_split: null,
  };
}

export async function createApp(
  host: ModelHost,
  config: ServerConfig,
): Promise<{ app: Hono; ctx: ServerCtx }> {
  const ctx: ServerCtx = { host, metrics: new Metrics(), config, progress: new ProgressFeed(host) };
  const app = new Hono();

  app.onError((err, c) => errorResponse(err, c.req.path));
  app.notFound((c) =>
    errorResponse(new NotFoundError(`no route for ${c.req.method} ${c.req.path}`), c.req.path)
  );

  app.use("*", async (c, next) => {
    await next();
    const route = ROUTES.has(c.req.path)
      ? c.req.path
      : c.req.path.startsWith("/v1/models/")
      ? "/v1/models/:id"
      : "other";
    ctx.metrics.request(route, c.res.status);
  });

  app.use("*", async (c, next) => {
    if (c.req.url.length > MAX_URL_BYTES) {
      throw new UriTooLongError(`the URL is ${c.req.url.length} bytes; at most ${MAX_URL_BYTES}`);
    }
    let bytes = 0;
    c.req.raw.headers.forEach((v, k) => (bytes += k.length + v.length + 4));
    if (bytes > MAX_HEADER_BYTES) {
      throw new HeadersTooLargeError(`the request headers are ${bytes} bytes; at most ${MAX_HEADER_BYTES}`);
    }
    await next();
  });

  if (config.cors?.length) {
    app.use(
      "*",
      cors({
        origin: config.cors.includes("*") ? "*" : config.cors,
        allowHeaders: ["authorization", "content-type", "x-api-key", "anthropic-version", "anthropic-beta"],
        exposeHeaders: ["flint-sequence-id"],
        maxAge: 600,
      }),
    );
  }

  app.use("*", async (c, next) => {
    if (config.apiKey && needsKey(c.req.path)) {
      const key = presentedKey(c.req.raw);
      if (key === null) {
        throw new AuthenticationError("missing API key: send Authorization: Bearer KEY or x-api-key: KEY");
      }
      if (!sameKey(key, config.apiKey)) throw new AuthenticationError("invalid API key");
    }
    await next();
  });

  app.get("/health", (c) => {
    const body = healthBody(host);
    return c.json(body, body.status === "failed" ? 503 : 200);
  });
  app.get(
    "/metrics",
    (c) =>
      c.body(ctx.metrics.render(host), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }),
  );
  app.get("/events", (c) => eventsResponse(ctx, c.req.raw));
  app.route("/", openaiRoutes(ctx));
  app.route("/", responsesRoutes(ctx));
  app.route("/", anthropicRoutes(ctx));
  app.route("/", adminRoutes(ctx));

  // The playground is another engineer's file; the server runs without it.
  const web = await import("./web_routes.ts").catch((e) => {
    console.error(`[flint] web routes not mounted: ${(e as Error).message}`);
    return null;
  });
  if (web?.webRoutes) app.route("/", await web.webRoutes());
  return { app, ctx };
}
