/**
 * `deno task serve`: an OpenAI- and Anthropic-compatible server for one model.
 *   [--model DIR] [--host 127.0.0.1] [--port 8080] [--context-window N] [--api-key KEY] [--max-batch N]
 *   [--models-dir DIR] [--alias 'claude-*,gpt-*'] [--prefill-chunk N] [--solo-prefill-chunk N]
 *   [--steps-per-submit N] [--max-body-mb N] [--kv-cache act|q8] [--f32]
 * Prefill chunks: 512 rows while other requests decode (--prefill-chunk), 2048 while a prompt runs alone
 * (--solo-prefill-chunk; default --prefill-chunk where that is given).
 * The API key may also come from FLINT_API_KEY (kept out of `ps`).
 * @module
 */
import { NotFoundError, PermissionError, ValidationError } from "../errors.ts";
import { createApp } from "../server/app.ts";
import { ModelHost } from "../server/host.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../platform/deno.ts";
import { kvCacheFlag, parseFlags, runCli } from "./args.ts";

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
  help: "boolean",
} as const;

const USAGE = `usage: deno task serve [--model DIR] [--host 127.0.0.1] [--port 8080] [--context-window N]
       [--api-key KEY] [--max-batch N] [--models-dir DIR] [--alias 'claude-*,gpt-*'] [--prefill-chunk N]
       [--solo-prefill-chunk N] [--steps-per-submit N] [--max-body-mb N] [--kv-cache act|q8] [--f32]`;

function size(b: number): string {
  if (b >= 2 ** 30) return `${(b / 2 ** 30).toFixed(2)} GiB`;
  return b >= 2 ** 20 ? `${(b / 2 ** 20).toFixed(1)} MiB` : `${(b / 2 ** 10).toFixed(0)} KiB`;
}

/**
 * `name` as a folder inside `root`. The name itself must stay inside (relative, no `..`); a symlink the
 * owner put in the models directory may point elsewhere, as model folders often do.
 */
export async function resolveInside(root: string, name: string): Promise<DiskModelSource> {
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
  return new DiskModelSource(path);
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

  console.log(`[flint] loading ${modelDir} ...`);
  const host = await ModelHost.open(new DiskModelSource(modelDir), {
    engine: {
      gpuOptions: { f16: !f.f32 },
      maxBatch,
      contextWindow: positive("context-window", f["context-window"]),
      prefillChunk: positive("prefill-chunk", f["prefill-chunk"]),
      soloPrefillChunk: positive("solo-prefill-chunk", f["solo-prefill-chunk"]),
      kvCache: kvCacheFlag(f["kv-cache"]),
    },
    stepsPerSubmit: positive("steps-per-submit", f["steps-per-submit"]),
  });
  const { app } = await createApp(host, {
    apiKey: apiKey || undefined,
    maxBodyBytes: Math.round(maxBodyMb * 2 ** 20),
    aliases: (f.alias ?? "").split(",").map((s) => s.trim()).filter(Boolean),
    resolveModel: (name) => resolveInside(modelsDir, name),
  });

  const { engine, name, capped } = host.served;
  const mem = engine.gpu.memory.snapshot();
  const ctxLine = f["context-window"]
    ? `${engine.contextWindow} tokens (--context-window)`
    : capped
    ? `${engine.contextWindow} tokens (capped by what fits in GPU memory; the model allows ${engine.info.maxPosition})`
    : `${engine.contextWindow} tokens (the model's maximum)`;
  const ac = new AbortController();
  const server = Deno.serve({
    hostname,
    port,
    signal: ac.signal,
    onListen: (addr) => {
      const shown = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
      console.log([
        `[flint] serving ${name} (${engine.info.modelType}, ${engine.info.quantization})`,
        `  adapter         ${engine.gpu.info.adapter}${engine.gpu.info.f16 ? " (f16)" : " (f32)"}`,
        `  context window  ${ctxLine}`,
        `  weights         ${size(engine.info.weightBytes)}`,
        `  KV cache        ${size(mem.kv)}${engine.kv.scales ? " 8-bit" : ""} (${engine.kv.freePages} pages of ${
          size(engine.kv.bytesPerPage)
        }), max batch ${engine.maxBatch}`,
        `  prefill chunks  ${engine.prefillChunk} rows beside decoding requests, ${engine.soloPrefillChunk} alone`,
        `  models dir      ${modelsDir}`,
        `  API key         ${apiKey ? "required (Bearer or x-api-key)" : "not set"}`,
        `Listening on http://${shown}:${addr.port}`,
      ].join("\n"));
      if (!apiKey && !/^(127\.|::1$|localhost$)/.test(addr.hostname)) {
        console.log(
          `[flint] warning: listening on ${addr.hostname} without --api-key; anyone who can reach it can use it`,
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
