/**
 * Starts `src/cli/serve.ts` in a subprocess for the benchmarks that talk to it over HTTP, and waits until it
 * listens. Its later stdout (the request log) is collected; stderr passes through. `sseBlocks` splits a
 * streamed response into its events.
 * @module
 */
const root = new URL("../", import.meta.url).pathname;

export interface ServeProcess {
  url: string;
  /** Everything it printed before listening (the banner). */
  banner: string;
  /** What it printed since. */
  log: string[];
  stop(): Promise<void>;
}

/** The blocks of an SSE response (`data: …`, `: keep-alive`, …), as they arrive. */
export async function* sseBlocks(res: Response): AsyncGenerator<string> {
  let buf = "";
  for await (const piece of res.body!.pipeThrough(new TextDecoderStream())) {
    buf += piece;
    for (let i; (i = buf.indexOf("\n\n")) >= 0;) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 2);
    }
  }
}

export async function startServe(args: string[]): Promise<ServeProcess> {
  const all = ["run", "-A", `${root}src/cli/serve.ts`, ...args];
  const proc = new Deno.Command(Deno.execPath(), { args: all, stdout: "piped", stderr: "inherit" }).spawn();
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let banner = "";
  let url = "";
  while (!url) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`server (${args.join(" ")}) exited before listening:\n${banner}`);
    banner += value;
    url = /Listening on (http:\/\/\S+)/.exec(banner)?.[1] ?? "";
  }
  const log: string[] = [];
  (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) log.push(r.value);
  })();
  return {
    url,
    banner,
    log,
    async stop() {
      proc.kill("SIGTERM");
      await proc.status;
    },
  };
}
