/**
 * Helpers for the browser tests: headless Chromium from Debian driven by playwright-core, a plain static
 * file server (standing in for "any static host"), the real server (`src/cli/serve.ts`) in a subprocess,
 * a recorder of the progress bar's states, and screenshots under test/artifacts/.
 * @module
 */
import { type Browser, chromium } from "playwright-core";

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

export interface FlintServer {
  /** Root URL, ending with "/". */
  url: string;
  /** Everything the server printed so far (banner, errors). */
  log(): string;
  stop(): Promise<void>;
}

/** Starts `deno task serve` on a free loopback port with `args`; resolves once it listens. */
export async function startFlintServer(args: string[]): Promise<FlintServer> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}src/cli/serve.ts`, "--port", "0", ...args],
    env: { XDG_RUNTIME_DIR: "/tmp" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const dec = new TextDecoder();
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const b of s) out += dec.decode(b, { stream: true });
  };
  const pumps = Promise.all([pump(proc.stdout), pump(proc.stderr)]);
  let exited = false;
  const status = proc.status.finally(() => (exited = true));
  const deadline = Date.now() + 300_000;
  let url = "";
  while (!url) {
    const m = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) url = `${m[1]}/`;
    else if (exited) throw new Error(`server exited at start-up:\n${out}`);
    else if (Date.now() > deadline) throw new Error(`server did not start:\n${out}`);
    else await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    log: () => out,
    async stop() {
      try {
        proc.kill("SIGTERM");
      } catch { /* already gone */ }
      await status;
      await pumps;
    },
  };
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
