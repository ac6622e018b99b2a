/**
 * POST /admin/load {"model": NAME, "context_window"?: N}: swap the served model without a restart. NAME
 * resolves only inside the configured models directory; in-flight requests drain first, and if the new
 * model fails to load the old one keeps serving (host.ts).
 * @module
 */
import { Hono } from "hono";
import { PermissionError } from "../errors.ts";
import type { ServerCtx } from "./context.ts";
import { Fields, readJsonBody } from "./validate.ts";

export function adminRoutes(ctx: ServerCtx): Hono {
  const app = new Hono();
  app.post("/admin/load", async (c) => {
    const f = new Fields(await readJsonBody(c.req.raw, ctx.config.maxBodyBytes));
    const name = f.string("model", { nonEmpty: true });
    const contextWindow = f.optNumber("context_window", { integer: true, min: 16 });
    if (!ctx.config.resolveModel) {
      throw new PermissionError("model loading is disabled on this server (no models directory)");
    }
    const dir = await ctx.config.resolveModel(name);
    const previous = ctx.host.served.name;
    const t0 = performance.now();
    const next = await ctx.host.swap(dir, contextWindow);
    return c.json({
      status: "ok",
      model: next.name,
      previous,
      context_window: next.info.contextWindow,
      load_ms: Math.round(performance.now() - t0),
    });
  });
  return app;
}
