/**
 * The Hono app: API key check, per-route request metrics, the OpenAI and Anthropic routes, health, metrics,
 * events, admin, and the web playground if `web_routes.ts` is there. Every error, thrown anywhere below,
 * becomes a response in one place: `onError` → errors.ts.
 * @module
 */
import { Hono } from "hono";
import { AuthenticationError, NotFoundError } from "../errors.ts";
import { adminRoutes } from "./admin.ts";
import { anthropicRoutes } from "./anthropic.ts";
import type { ServerConfig, ServerCtx } from "./context.ts";
import { errorResponse } from "./errors.ts";
import { eventsResponse } from "./events.ts";
import type { ModelHost } from "./host.ts";
import { Metrics } from "./metrics.ts";
import { openaiRoutes } from "./openai.ts";

const ROUTES = new Set([
  "/v1/chat/completions",
  "/v1/completions",
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

function presentedKey(req: Request): string | null {
  const auth = req.headers.get("authorization");
  if (auth?.toLowerCase().startsWith("bearer ")) return auth.slice(7).trim();
  return req.headers.get("x-api-key");
}

export function healthBody(host: ModelHost): Record<string, unknown> {
  const { engine, scheduler, name } = host.served;
  const kv = engine.kv;
  return {
    status: host.swapping ? "loading" : "ok",
    model: name,
    context_window: engine.contextWindow,
    adapter: engine.gpu.info.adapter,
    kv: {
      used_pages: kv.usedPages,
      free_pages: kv.freePages,
      total_pages: kv.usedPages + kv.freePages,
      bytes_per_page: kv.bytesPerPage,
      used_bytes: kv.usedPages * kv.bytesPerPage,
    },
    queue_depth: scheduler.queued,
    running: scheduler.running,
    in_flight: host.inFlight,
    // Share of prefill done by the CPU; null until CPU co-prefill exists.
    cpu_split: null,
  };
}

export async function createApp(
  host: ModelHost,
  config: ServerConfig,
): Promise<{ app: Hono; ctx: ServerCtx }> {
  const ctx: ServerCtx = { host, metrics: new Metrics(), config };
  const app = new Hono();

  app.onError((err, c) => errorResponse(err, c.req.path));
  app.notFound((c) =>
    errorResponse(new NotFoundError(`no route for ${c.req.method} ${c.req.path}`), c.req.path)
  );

  app.use("*", async (c, next) => {
    await next();
    ctx.metrics.request(ROUTES.has(c.req.path) ? c.req.path : "other", c.res.status);
  });

  app.use("*", async (c, next) => {
    if (config.apiKey && c.req.path !== "/health") {
      const key = presentedKey(c.req.raw);
      if (key === null) {
        throw new AuthenticationError("missing API key: send Authorization: Bearer KEY or x-api-key: KEY");
      }
      if (!sameKey(key, config.apiKey)) throw new AuthenticationError("invalid API key");
    }
    await next();
  });

  app.get("/health", (c) => c.json(healthBody(host)));
  app.get(
    "/metrics",
    (c) =>
      c.body(ctx.metrics.render(host), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }),
  );
  app.get("/events", (c) => eventsResponse(ctx, c.req.raw));
  app.route("/", openaiRoutes(ctx));
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
