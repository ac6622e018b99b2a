/**
 * `deno task serve`: an OpenAI- and Anthropic-compatible server for one model.
 *   [--model DIR] [--host 127.0.0.1] [--port 8080] [--context-window N] [--api-key KEY] [--max-batch N]
 *   [--models-dir DIR] [--alias 'claude-*,gpt-*'] [--prefill-chunk N] [--solo-prefill-chunk N]
 *   [--steps-per-submit N] [--max-body-mb N] [--kv-cache act|q8] [--f32] [--webgpu deno|dawn|auto]
 *   [--strict-model-name]
 *   [--cors ORIGIN[,ORIGIN...]] [--prefix-cache-bytes N] [--prefix-cache-dir DIR|none]
 *   [--prefix-cache-disk-bytes N] [--kv-budget-gb N] [--synthetic SHAPE]
 * Prefill chunks: 512 rows while other requests decode (--prefill-chunk), 2048 while a prompt runs alone, 4096
 * where its matmuls run on matrix units (--solo-prefill-chunk; default --prefill-chunk where that is given).
 * Prefix cache: KV pages of earlier prompts are kept and reused by prompts that start with the same tokens
 * (--prefix-cache-bytes, default the whole KV pool: cached pages are free pages that remember, and any
 * request takes them back before it is refused; 0 turns it off). Pages leaving memory go to a folder
 * (--prefix-cache-dir, default $XDG_CACHE_HOME/flint/prefix or ~/.cache/flint/prefix; none: no disk tier)
 * of at most --prefix-cache-disk-bytes (default 16 GiB).
 * The API key may also come from FLINT_API_KEY (kept out of `ps`). The engine runs in a worker
 * (server/model_worker.ts), so this thread only serves HTTP.
 * @module
 */
import { NotFoundError, PermissionError, ValidationError } from "../errors.ts";
import { createApp } from "../server/app.ts";
import { ModelHost } from "../server/host.ts";
import type { PrefixCacheReport } from "../server/worker_protocol.ts";
import { DEFAULT_MODEL_DIR } from "../platform/deno.ts";
import { defaultPrefixCacheDir } from "../platform/prefix_folder.ts";
import { kvCacheFlag, parseFlags, runCli, webgpuFlag } from "./args.ts";

const SPEC = {
  model: "string",
  "models-dir": "string",
  host: "string",
  port: "number",
  "context-window": "number",
  "api-key": "string",
  "max-batch": "number",
  alias: "string",
  "prefill-chunk": "number",
  "solo-prefill-chunk": "number",
  "steps-per-submit": "number",
  "max-body-mb": "number",
  "kv-cache": "string",
  f32: "boolean",
  webgpu: "string",
  "strict-model-name": "boolean",
  "keep-alive-s": "number",
  cors: "string",
  "prefix-cache-bytes": "number",
  "prefix-cache-dir": "string",
  "prefix-cache-disk-bytes": "number",
  "kv-budget-gb": "number",
  synthetic: "string",
  help: "boolean",
} as const;

const USAGE = `usage: npm start -- [--model DIR] [--host 127.0.0.1] [--port 8080] [--context-window N]
       [--api-key KEY] [--max-batch N] [--models-dir DIR] [--alias 'claude-*,gpt-*'] [--prefill-chunk N]
       [--solo-prefill-chunk N] [--steps-per-submit N] [--max-body-mb N] [--kv-cache act|q8] [--f32]
       [--webgpu deno|dawn|auto] [--strict-model-name] [--cors ORIGIN[,ORIGIN...]] [--keep-alive-s 10]
       [--prefix-cache-bytes N]
       [--prefix-cache-dir DIR|none] [--prefix-cache-disk-bytes N] [--kv-budget-gb 4] [--synthetic SHAPE]
Any model name in a request is answered by the served model, unless --strict-model-name (then only its
folder name and the --alias patterns). --cors lets pages from those origins call the API ("*": any).
Streams send a keep-alive (an OpenAI SSE comment, an Anthropic ping event) every --keep-alive-s seconds
while there is nothing else to send.
Prompts that start like an earlier one reuse its KV pages: --prefix-cache-bytes caps the memory they keep
(default: the whole KV pool, since any request takes cached pages back before it is refused; 0: off).
Pages leaving memory are kept in --prefix-cache-dir (default $XDG_CACHE_HOME/flint/prefix, else
~/.cache/flint/prefix; none: not kept), up to --prefix-cache-disk-bytes (default 16 GiB).
--kv-budget-gb caps the KV pool (default 4), and with it the longest context that fits. --synthetic SHAPE
(benchmarks: qwen3-4b, ...) serves random weights of that shape with the bundled model's tokenizer.
--webgpu auto (default) runs on Dawn (npm webgpu) where it offers the matrix units Flint's kernels use
(NVIDIA tensor cores), else on Deno's WebGPU; deno or dawn picks one.`;

function size(b: number): string {
  if (b >= 2 ** 30) return `${(b / 2 ** 30).toFixed(2)} GiB`;
  return b >= 2 ** 20 ? `${(b / 2 ** 20).toFixed(1)} MiB` : `${(b / 2 ** 10).toFixed(0)} KiB`;
}

/** `--name N` as a byte count ≥ 0 (undefined when absent). */
function bytesFlag(name: string, v: number | undefined): number | undefined {
  if (v === undefined) return v;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new ValidationError(`--${name} must be a whole number of bytes (0 or more)`, name);
  }
  return v;
}

/** The banner's prefix cache line: its memory budget, and where pages that leave memory go. */
function cacheLine(pc: PrefixCacheReport | null, pageBytes: number): string {
  if (!pc) return "off";
  const disk = pc.dir ? `${pc.dir}, up to ${size(pc.diskBudgetBytes ?? 0)}` : "off";
  return `up to ${size(pc.budgetPages * pageBytes)} in memory (${pc.budgetPages} KV pages); disk ${disk}`;
}

/**
 * `name` as a folder inside `root`. The name itself must stay inside (relative, no `..`); a symlink the
 * owner put in the models directory may point elsewhere, as model folders often do.
 */
export async function resolveInside(root: string, name: string): Promise<string> {
  const parts = name.split("/").filter((p) => p && p !== ".");
  if (
    name.startsWith("/") || name.includes("\0") || name.includes("\\") || parts.includes("..") ||
    !parts.length
  ) {
    throw new PermissionError(
      `model "${name}" is outside the models directory; give a folder name inside ${root}`,
    );
  }
  const path = `${root.replace(/\/+$/, "")}/${parts.join("/")}`;
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch {
    throw new NotFoundError(`model "${name}" not found in the models directory ${root}`, "model_not_found");
  }
  if (!info.isDirectory) {
    throw new NotFoundError(`model "${name}" is not a folder in ${root}`, "model_not_found");
  }
  return path;
}

/** Fails at once, with one line, when the address is taken (not after loading a model for minutes). */
function checkPort(hostname: string, port: number): void {
  if (port === 0) return;
  try {
    Deno.listen({ hostname, port }).close();
  } catch (e) {
    const why = e instanceof Deno.errors.AddrInUse
      ? "is already in use (another server?); choose another with --port N"
      : `cannot be opened: ${(e as Error).message}`;
    throw new ValidationError(`${hostname}:${port} ${why}`, "port");
  }
}

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    console.log(USAGE);
    return 0;
  }
  const positive = (k: keyof typeof f, v: number | undefined) => {
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) {
      throw new ValidationError(`--${String(k)} must be a positive integer`, String(k));
    }
    return v;
  };
  const modelDir = f.model ?? DEFAULT_MODEL_DIR;
  // /admin/load only reaches folders in here; default the repository's models/ (the bundled model's home).
  const modelsDir = f["models-dir"] ?? new URL("../../models", import.meta.url).pathname;
  const hostname = f.host ?? "127.0.0.1";
  const port = f.port ?? 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ValidationError("--port must be in 0..65535", "port");
  }
  const apiKey = f["api-key"] ?? Deno.env.get("FLINT_API_KEY") ?? undefined;
  const maxBatch = positive("max-batch", f["max-batch"]) ?? 8;
  const maxBodyMb = f["max-body-mb"] ?? 32;
  if (!(maxBodyMb > 0)) throw new ValidationError("--max-body-mb must be positive", "max-body-mb");

  const positiveSeconds = (v: number) => {
    if (!(v > 0)) {
      throw new ValidationError("--keep-alive-s must be a positive number of seconds", "keep-alive-s");
    }
    return v;
  };
  const list = (v: string | undefined) => (v ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  const dirFlag = f["prefix-cache-dir"];
  if (dirFlag === "") {
    throw new ValidationError("--prefix-cache-dir needs a folder or none", "prefix-cache-dir");
  }
  const prefixCacheDir = dirFlag === "none" ? null : dirFlag ?? defaultPrefixCacheDir();
  checkPort(hostname, port);
  const webgpu = webgpuFlag(f.webgpu);
  console.log(
    `[flint] loading ${f.synthetic ? `synthetic ${f.synthetic} (tokenizer of ${modelDir})` : modelDir} ...`,
  );
  const host = await ModelHost.open(modelDir, {
    f16: !f.f32,
    webgpu,
    maxBatch,
    contextWindow: positive("context-window", f["context-window"]),
    prefillChunk: positive("prefill-chunk", f["prefill-chunk"]),
    soloPrefillChunk: positive("solo-prefill-chunk", f["solo-prefill-chunk"]),
    kvCache: kvCacheFlag(f["kv-cache"]),
    stepsPerSubmit: positive("steps-per-submit", f["steps-per-submit"]),
    prefixCacheBytes: bytesFlag("prefix-cache-bytes", f["prefix-cache-bytes"]),
    prefixCacheDir,
    prefixCacheDiskBytes: bytesFlag("prefix-cache-disk-bytes", f["prefix-cache-disk-bytes"]) ?? 16 * 2 ** 30,
    kvBudgetBytes: f["kv-budget-gb"] !== undefined
      ? Math.round((positive("kv-budget-gb", f["kv-budget-gb"]) ?? 4) * 2 ** 30)
      : undefined,
    synthetic: f.synthetic,
  });
  const { app } = await createApp(host, {
    apiKey: apiKey || undefined,
    maxBodyBytes: Math.round(maxBodyMb * 2 ** 20),
    aliases: list(f.alias),
    strictModelName: !!f["strict-model-name"],
    keepAliveMs: f["keep-alive-s"] !== undefined ? positiveSeconds(f["keep-alive-s"]) * 1000 : undefined,
    cors: list(f.cors),
    resolveModel: (name) => resolveInside(modelsDir, name),
  });

  const { info, name, stats } = host.served;
  const ctxLine = f["context-window"]
    ? `${info.contextWindow} tokens (--context-window)`
    : info.capped
    ? `${info.contextWindow} tokens (capped by what fits in GPU memory; the model allows ${info.maxPosition})`
    : `${info.contextWindow} tokens (the model's maximum)`;
  const ac = new AbortController();
  const server = Deno.serve({
    hostname,
    port,
    signal: ac.signal,
    onListen: (addr) => {
      const shown = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
      console.log([
        `[flint] serving ${name} (${info.modelType}, ${info.quantization})`,
        `  adapter         ${info.adapter}${info.f16 ? " (f16)" : " (f32)"}, WebGPU of ${info.webgpu}`,
        `  context window  ${ctxLine}`,
        `  weights         ${size(info.weightBytes)}`,
        `  KV cache        ${size(stats.memory.kv)}${info.kv8 ? " 8-bit" : ""} (${info.kvPages} pages of ${
          size(info.kvPageBytes)
        }), max batch ${info.maxBatch}`,
        `  prefill chunks  ${info.prefillChunk} rows beside decoding requests, ` +
        `${info.soloPrefillChunk} alone`,
        `  prefix cache    ${cacheLine(stats.prefixCache, info.kvPageBytes)}`,
        `  model names     ${
          f["strict-model-name"]
            ? `${name}${f.alias ? `, ${f.alias}` : ""} only`
            : "any (answered by this model)"
        }`,
        `  models dir      ${modelsDir}`,
        `  API key         ${
          apiKey ? "required on the API (Bearer or x-api-key); the pages ask for it" : "not set"
        }`,
        `  CORS            ${f.cors ? f.cors : "off (same origin only)"}`,
        `Listening on http://${shown}:${addr.port}`,
      ].join("\n"));
      if (!apiKey && !/^(127\.|::1$|localhost$)/.test(addr.hostname)) {
        console.log(
          `[flint] warning: listening on ${addr.hostname} without --api-key; ` +
            `anyone who can reach it can use it`,
        );
      }
    },
  }, app.fetch);

  const stop = () => ac.abort();
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  await server.finished;
  // Open streams (/events) would hold the shutdown forever: give the GPU a moment, then go.
  await Promise.race([host.close(), new Promise((r) => setTimeout(r, 3000))]);
  return 0;
}

if (import.meta.main) await runCli(main);
