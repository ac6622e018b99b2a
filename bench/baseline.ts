/**
 * Runs bench/baseline_torch.py for one model's config and returns its JSON, or `{ error }` when python3,
 * torch, CUDA or the script fail: the benchmark reports that and carries on.
 * @module
 */

export interface TorchBaseline {
  error?: string;
  framework?: string;
  device?: string;
  cache?: string;
  attn?: string;
  load_s?: number;
  peak_memory_bytes?: number;
  prefill?: { tokens: number; ttft_ms: number; tps: number }[];
  decode?: { depth: number; tps: number }[];
}

export interface BaselineOptions {
  prompts: number[];
  depths: number[];
  decodeTokens: number;
  runs: number;
  warmup: number;
  python?: string;
  /** Extra arguments for the script (e.g. ["--cache", "dynamic"]). */
  extra?: string[];
  log?: (s: string) => void;
}

const SCRIPT = new URL("./baseline_torch.py", import.meta.url).pathname;

export async function runTorchBaseline(
  config: Record<string, unknown>,
  o: BaselineOptions,
): Promise<TorchBaseline> {
  const dir = await Deno.makeTempDir({ prefix: "flint-baseline-" });
  const cfgPath = `${dir}/config.json`;
  await Deno.writeTextFile(cfgPath, JSON.stringify(config));
  const args = [
    SCRIPT,
    "--config",
    cfgPath,
    "--prompts",
    o.prompts.join(","),
    "--depths",
    o.depths.join(","),
    "--decode-tokens",
    String(o.decodeTokens),
    "--runs",
    String(o.runs),
    "--warmup",
    String(o.warmup),
    ...(o.extra ?? []),
  ];
  const python = o.python ?? "python3";
  o.log?.(`  ${python} ${args.join(" ")}`);
  try {
    const child = new Deno.Command(python, { args, stdout: "piped", stderr: "piped" }).spawn();
    // Relay the script's progress lines as they come; keep the tail for the error message.
    let tail = "";
    const relay = (async () => {
      const dec = new TextDecoder();
      for await (const b of child.stderr) {
        const s = dec.decode(b, { stream: true });
        tail = (tail + s).slice(-2000);
        for (const line of s.split("\n")) if (line.trim()) o.log?.(`  ${line}`);
      }
    })();
    const [out, status] = await Promise.all([new Response(child.stdout).text(), child.status]);
    await relay;
    const last = out.trim().split("\n").pop() ?? "";
    let parsed: TorchBaseline | null = null;
    try {
      parsed = JSON.parse(last);
    } catch { /* reported below */ }
    if (parsed?.error) return { error: parsed.error };
    if (!status.success || !parsed) {
      return {
        error: `${python} exited with ${status.code}: ${
          tail.trim().split("\n").slice(-3).join(" | ") || "no output"
        }`,
      };
    }
    return parsed;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { error: `${python} not found` };
    return { error: `could not run ${python}: ${(e as Error).message}` };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
