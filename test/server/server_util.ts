/**
 * Starts the real server (`src/cli/serve.ts`) in a subprocess on 127.0.0.1 with an OS-chosen port, for
 * tests that talk to it over HTTP. Small context windows keep it quick on a software GPU.
 */
import { ROOT } from "../util/fixtures.ts";

export interface RunningServer {
  url: string;
  /** Everything the server printed so far (banner, errors). */
  log(): string;
  stop(): Promise<void>;
}

export async function startServer(args: string[] = []): Promise<RunningServer> {
  const proc = new Deno.Command(Deno.execPath(), {
    // No prefix cache folder unless a test names one: runs must not share pages through ~/.cache.
    args: ["run", "-A", `${ROOT}src/cli/serve.ts`, "--port", "0", "--prefix-cache-dir", "none", ...args],
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
  const exited = proc.status.then((s) => s);
  let url = "";
  const deadline = Date.now() + 300_000;
  while (!url) {
    const m = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) url = m[1];
    else if (Date.now() > deadline) throw new Error(`server did not start:\n${out}`);
    else {
      const done = await Promise.race([
        exited.then(() => true),
        new Promise((r) => setTimeout(() => r(false), 100)),
      ]);
      if (done) throw new Error(`server exited at start-up:\n${out}`);
    }
  }
  return {
    url,
    log: () => out,
    async stop() {
      try {
        proc.kill("SIGTERM");
      } catch { /* already gone */ }
      await exited;
      await pumps;
    },
  };
}

/** One parsed SSE event. */
export interface SseEvent {
  event: string | null;
  data: string;
}

/** Reads SSE events from a fetch response body as they arrive. */
export async function* sseEvents(res: Response): AsyncGenerator<SseEvent> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let event: string | null = null;
        const data: string[] = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) event = line.slice(7);
          else if (line.startsWith("data: ")) data.push(line.slice(6));
        }
        if (data.length) yield { event, data: data.join("\n") };
      }
    }
  } finally {
    // Leaving early (break/return) closes the connection: that is how a client disconnects.
    await reader.cancel().catch(() => {});
  }
}

export async function health(url: string): Promise<any> {
  const r = await fetch(`${url}/health`);
  if (r.status !== 200) throw new Error(`/health answered ${r.status}`);
  return await r.json();
}

/** Polls /health until `pred` holds (a deadline, not a timing assertion: slow machines just wait longer). */
export async function waitForHealth(
  url: string,
  pred: (h: any) => boolean,
  timeoutMs = 120_000,
): Promise<any> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const h = await health(url);
    if (pred(h)) return h;
    if (Date.now() > end) throw new Error(`/health never reached the expected state: ${JSON.stringify(h)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
