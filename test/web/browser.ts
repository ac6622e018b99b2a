/**
 * Helpers for the browser tests: headless Chromium from Debian driven by playwright-core, a plain static
 * file server (standing in for "any static host"), and screenshots under test/artifacts/.
 * @module
 */
import { type Browser, chromium } from "playwright-core";

export const ROOT = new URL("../../", import.meta.url).pathname;
export const ARTIFACTS = `${ROOT}test/artifacts`;
export const CHROMIUM = "/usr/bin/chromium";

/** These flags give a SwiftShader WebGPU adapter (subgroups yes, shader-f16 no) on a machine without a GPU. */
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
    throw new Error(`${CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install chromium)`);
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
      return new Response(body, { headers: { "content-type": TYPES[path.split(".").pop()!] ?? "application/octet-stream" } });
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
