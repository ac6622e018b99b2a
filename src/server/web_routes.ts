/**
 * The playground and kernel lab, served by `deno task serve` at `/` and `/lab`. No build step for the user:
 * app.js (web/main.ts and the engine, bundled for browsers with `deno bundle`) is built once per process
 * when `webRoutes()` is first called and kept in memory; HTML, CSS and wgsl/ come straight from the
 * repository. If bundling fails (e.g. no esbuild in the Deno cache on an offline machine), a prebuilt
 * `dist/web/app.js` from `deno task build:web` is served instead.
 * @module
 */
import { Hono } from "hono";
import { bundleApp, STATIC_FILES } from "../../web/build.ts";

const ROOT = new URL("../../", import.meta.url);

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  svg: "image/svg+xml",
  wgsl: "text/plain; charset=utf-8",
};

let bundle: Promise<string> | null = null;

/** app.js, built once per process (concurrent callers share the build). */
export function appBundle(): Promise<string> {
  bundle ??= bundleApp().catch(async (e) => {
    try {
      const js = await Deno.readTextFile(new URL("dist/web/app.js", ROOT));
      console.error(
        `[flint] bundling the playground failed; serving dist/web/app.js instead.\n${(e as Error).message}`,
      );
      return js;
    } catch {
      bundle = null; // let a later request try again
      throw e;
    }
  });
  return bundle;
}

export interface WebRoutesOptions {
  /** Start bundling now rather than on the first request for app.js (default true). */
  eager?: boolean;
}

/** A Hono app with `/`, `/lab`, `/app.js`, the static files and `/wgsl/*`; mount it at the server root. */
export function webRoutes(opts: WebRoutesOptions = {}): Hono {
  if (opts.eager !== false) appBundle().catch(() => {}); // errors are reported by the request that needs it
  const app = new Hono();
  const file = (rel: string) => async () => {
    const body = await Deno.readFile(new URL(rel, ROOT));
    return new Response(body, {
      headers: { "content-type": TYPES[rel.split(".").pop()!], "cache-control": "no-cache" },
    });
  };
  app.get("/", file("web/index.html"));
  app.get("/lab", file("web/lab.html"));
  for (const f of STATIC_FILES) app.get(`/${f}`, file(`web/${f}`));
  app.get("/app.js", async (c) => {
    try {
      return c.body(await appBundle(), 200, { "content-type": TYPES.js, "cache-control": "no-cache" });
    } catch (e) {
      return c.text(`playground bundle failed to build:\n${(e as Error).message}`, 500);
    }
  });
  app.get("/wgsl/*", async (c) => {
    const rel = c.req.path.slice("/wgsl/".length);
    // Only shader files below wgsl/: no "..", no odd characters.
    if (!/^([\w-]+\/)*[\w.-]+\.wgsl$/.test(rel) || rel.includes("..")) return c.text("not found", 404);
    try {
      return await file(`wgsl/${rel}`)();
    } catch {
      return c.text("not found", 404);
    }
  });
  return app;
}
