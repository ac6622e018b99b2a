/**
 * Helpers for the browser tests: headless Chromium from Debian driven by playwright-core, a plain static
 * file server (standing in for "any static host"), the real server (`src/cli/serve.ts`) in a subprocess,
 * a recorder of the progress bar's states, and screenshots under test/artifacts/.
 * @module
 */
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { type RunningServer, startServer } from "../server/server_util.ts";

export const ROOT = new URL("../../", import.meta.url).pathname;
export const ARTIFACTS = `${ROOT}test/artifacts`;
export const CHROMIUM = "/usr/bin/chromium";

/**
 * These flags give a SwiftShader WebGPU adapter (subgroups yes, shader-f16 no) on a machine without a GPU.
 */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--enable-unsafe-webgpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export async function launchChromium(): Promise<Browser> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `${CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install chromium)`,
    );
  }
  return await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
}

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml",
  wgsl: "text/plain; charset=utf-8",
};

/** Serves `dir` as files and nothing else (no rewrites, no /lab alias): what a static host does. */
export function staticServer(dir: string): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    let path = decodeURIComponent(new URL(req.url).pathname);
    if (path.endsWith("/")) path += "index.html";
    if (path.includes("..")) return new Response("bad path", { status: 400 });
    try {
      const body = await Deno.readFile(`${dir}${path}`);
      return new Response(body, {
        headers: { "content-type": TYPES[path.split(".").pop()!] ?? "application/octet-stream" },
      });
    } catch {
      return new Response("not found", { status: 404 });
    }
  });
}

/** Serves a fetch handler (the server's web routes) on a free loopback port. */
export function serve(fetch: (req: Request) => Response | Promise<Response>): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, fetch);
}

export function urlOf(s: Deno.HttpServer<Deno.NetAddr>): string {
  return `http://127.0.0.1:${s.addr.port}/`;
}

export interface FlintServer extends RunningServer {
  /** Root URL, ending with "/". */
  url: string;
}

/** Starts `deno task serve` on a free loopback port with `args` (test/server's helper), root URL with "/". */
export async function startFlintServer(args: string[]): Promise<FlintServer> {
  const s = await startServer(args);
  return { ...s, url: `${s.url}/` };
}

/** One state of the playground's progress bar, as recorded by `recordProgress`. */
export interface ProgressState {
  stage: string | null;
  /** aria-valuenow (percent), null while indeterminate or hidden. */
  value: number | null;
  text: string;
  hidden: boolean;
}

/**
 * An init script (`context.addInitScript(recordProgress)`): every change of #progress is appended to
 * `window.__progress`, so a test reads what the bar showed without sampling it in time.
 */
export function recordProgress(): void {
  const log: unknown[] = ((globalThis as any).__progress = []);
  new MutationObserver((records) => {
    for (const r of records) {
      const box = r.target as HTMLElement;
      if (box.id !== "progress") continue;
      const v = box.getAttribute("aria-valuenow");
      const text = box.getAttribute("aria-valuetext") ?? "";
      const value = v === null ? null : Number(v);
      log.push({ stage: box.dataset.stage ?? null, value, text, hidden: box.hidden });
    }
  }).observe(document, {
    subtree: true,
    attributes: true,
    attributeFilter: ["aria-valuenow", "data-stage", "aria-valuetext", "hidden"],
  });
}

/** A page that collects uncaught exceptions (the tests expect none). */
export async function open(ctx: BrowserContext, url: string): Promise<{ page: Page; errors: string[] }> {
  const page = await ctx.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  return { page, errors };
}
