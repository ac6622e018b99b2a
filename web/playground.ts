/**
 * The chat page: mode (model in this tab, or the server), settings, composer, progress bar and notices.
 * The model itself is behind `ChatBackend` (local.ts, remote.ts), the transcript in chat_view.ts.
 * @module
 */
import { FlintError } from "../src/errors.ts";
import { type BlobModelSource, cacheModel, formatBytes } from "../src/platform/browser.ts";
import type { ChatBackend, ChatTurn, Sampling } from "./backend.ts";
import { Transcript } from "./chat_view.ts";
import { byId, notice, prefs } from "./dom.ts";
import { describeGpu, LocalModel } from "./local.ts";
import { ModelsPanel } from "./models_panel.ts";
import { listServerModels, RemoteModel } from "./remote.ts";

type Mode = "local" | "remote";

// Kept in localStorage across reloads. The API key is not: it stays in this page only.
const SETTINGS = ["temperature", "max-tokens", "top-p", "top-k", "min-p", "seed", "system-prompt", "context-window", "kv-cache", "server-url"];

class Playground {
  readonly notices = byId("notices");
  readonly transcript = new Transcript(byId("transcript"));
  readonly prompt = byId<HTMLTextAreaElement>("prompt");
  readonly send = byId<HTMLButtonElement>("send");
  readonly stop = byId<HTMLButtonElement>("stop");
  readonly pill = byId("gpu-status");
  readonly panel: ModelsPanel;
  mode: Mode = "local";
  local: LocalModel | null = null;
  remote: RemoteModel | null = null;
  history: ChatTurn[] = [];
  busy: "loading" | "generating" | null = null;
  abort: AbortController | null = null;

  constructor() {
    this.panel = new ModelsPanel({
      load: (src, fresh) => this.loadLocal(src, fresh),
      current: () => this.local?.source.name ?? null,
      error: (e) => this.error(e),
    });
    for (const id of SETTINGS) {
      const el = byId<HTMLInputElement>(id);
      const saved = prefs.get(id);
      if (saved !== null) el.value = saved;
      el.addEventListener("change", () => prefs.set(id, el.value));
    }
    // Both shape the KV pool, which is allocated at load: the model is loaded again.
    for (const id of ["context-window", "kv-cache"]) {
      byId(id).addEventListener("change", () => {
        if (this.local && !this.busy) this.loadLocal(this.local.source, false).catch((e) => this.error(e));
      });
    }
    for (const b of document.querySelectorAll<HTMLButtonElement>("[data-mode]")) {
      b.addEventListener("click", () => this.setMode(b.dataset.mode as Mode, true));
    }
    byId("server-url").addEventListener("change", () => this.connectRemote());
    byId("api-key").addEventListener("change", () => this.connectRemote());
    byId("server-model").addEventListener("change", () => this.connectRemote());
    byId("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    this.stop.addEventListener("click", () => this.abort?.abort());
    byId("clear").addEventListener("click", () => this.newChat());
    this.prompt.addEventListener("input", () => this.update());
    this.prompt.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    document.addEventListener("keydown", (e) => {
      const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement ||
        e.target instanceof HTMLSelectElement;
      if (e.key === "Escape" && this.abort) this.abort.abort();
      else if (e.key === "/" && !typing) {
        e.preventDefault();
        this.prompt.focus();
      }
      else if (e.key === "l" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.newChat();
      }
    });
  }

  async start(): Promise<void> {
    const saved = prefs.get("mode") as Mode | null;
    const cached = await this.panel.refresh().catch(() => []);
    // Served by `deno task serve`: the server has a model loaded, so that is the quickest start.
    const server = await listServerModels(this.serverBase(), { apiKey: this.apiKey(), signal: AbortSignal.timeout(1500) })
      .then(() => true, () => false);
    this.setMode(saved ?? (server && !cached.length ? "remote" : "local"), false);
    const last = prefs.get("lastModel");
    if (this.mode === "local" && last && cached.some((m) => m.name === last)) await this.panel.loadCached(last);
    this.update();
    this.prompt.focus();
  }

  setMode(mode: Mode, save: boolean): void {
    this.mode = mode;
    if (save) prefs.set("mode", mode);
    for (const b of document.querySelectorAll<HTMLElement>("[data-mode]")) {
      b.setAttribute("aria-checked", String(b.dataset.mode === mode));
    }
    byId("local-panel").hidden = mode !== "local";
    byId("remote-panel").hidden = mode !== "remote";
    byId("context-window").closest("label")!.hidden = mode !== "local";
    byId("kv-cache").closest("label")!.hidden = mode !== "local";
    if (mode === "local") this.checkGpu();
    else this.connectRemote();
    this.update();
  }

  /** Status pill and notices: no WebGPU at all, or no shader-f16 (the f32 path still runs). */
  async checkGpu(): Promise<void> {
    if (this.local) return this.setPill(this.local.label, "ok");
    try {
      const g = await describeGpu();
      this.setPill(`${g.adapter} · ${g.f16 ? "f16" : "f32"}`, "ok");
      if (!g.f16) {
        notice(this.notices, "warn",
          "This GPU has no shader-f16: models run with f32 activations. Results are the same; it is slower and needs more memory.", "f16");
      }
    } catch (e) {
      this.setPill("no WebGPU", "bad");
      notice(this.notices, "error", `${(e as Error).message}. Models cannot run in this tab; switch to Server mode to use a Flint server.`, "gpu");
    }
  }

  setPill(text: string, kind: "ok" | "bad" | "busy"): void {
    this.pill.textContent = text;
    this.pill.dataset.kind = kind;
  }

  serverBase(): string {
    const v = byId<HTMLInputElement>("server-url").value.trim();
    return new URL(v ? v.replace(/\/?$/, "/") : "./", v ? undefined : location.origin + "/").href;
  }

  apiKey(): string {
    return byId<HTMLInputElement>("api-key").value.trim();
  }

  async connectRemote(): Promise<void> {
    const select = byId<HTMLSelectElement>("server-model");
    const base = this.serverBase();
    try {
      const ids = await listServerModels(base, { apiKey: this.apiKey(), signal: AbortSignal.timeout(5000) });
      const want = ids.includes(select.value) ? select.value : ids[0];
      select.replaceChildren(...ids.map((id) => new Option(id, id, false, id === want)));
      this.remote = ids.length ? new RemoteModel(base, want, this.apiKey()) : null;
      this.setPill(this.remote ? this.remote.label : "server has no model", this.remote ? "ok" : "bad");
      this.notices.querySelector('[data-key="server"]')?.remove();
    } catch (e) {
      this.remote = null;
      select.replaceChildren(new Option("(not connected)", ""));
      this.setPill("server unreachable", "bad");
      notice(this.notices, "error", `No Flint server at ${base} (${(e as Error).message}). Start one with "deno task serve", or set its URL.`, "server");
    }
    this.update();
  }

  async loadLocal(src: BlobModelSource, fresh: boolean): Promise<void> {
    if (this.busy) return;
    this.busy = "loading";
    this.update();
    this.notices.querySelector('[data-key="load"]')?.remove();
    const old = this.local;
    this.local = null;
    await old?.unload();
    this.progress(`Loading ${src.name}`, 0, 1);
    this.setPill(`loading ${src.name}…`, "busy");
    try {
      this.local = await LocalModel.load(src, {
        contextWindow: Number(byId<HTMLSelectElement>("context-window").value),
        kvCache: byId<HTMLSelectElement>("kv-cache").value === "q8" ? "q8" : "act",
        onProgress: (done, total) =>
          total === null
            ? this.progress(`Compiling kernels for ${src.name}`, 1, 1)
            : this.progress(`Loading ${src.name}: ${formatBytes(done)} of ${formatBytes(total)}`, done, total),
      });
      if (fresh) {
        this.progress(`Saving ${src.name} in this browser`, 1, 1);
        await cacheModel(src).catch((e) => this.error(e, "cache"));
      }
      prefs.set("lastModel", src.name);
      this.setPill(this.local.label, "ok");
    } catch (e) {
      this.setPill("no model loaded", "bad");
      this.error(e, "load");
    } finally {
      this.busy = null;
      this.progress(null);
      await this.panel.refresh().catch(() => {});
      this.update();
    }
  }

  backend(): ChatBackend | null {
    return this.mode === "local" ? this.local : this.remote;
  }

  sampling(): Sampling {
    const num = (id: string, def: number) => {
      const v = Number(byId<HTMLInputElement>(id).value);
      return Number.isFinite(v) && byId<HTMLInputElement>(id).value !== "" ? v : def;
    };
    return {
      temperature: Math.max(0, num("temperature", 0.7)),
      maxTokens: Math.max(1, Math.floor(num("max-tokens", 512))),
      topP: Math.min(1, Math.max(0, num("top-p", 1))),
      topK: Math.max(0, Math.floor(num("top-k", 0))),
      minP: Math.min(1, Math.max(0, num("min-p", 0))),
      seed: Math.max(0, Math.floor(num("seed", 0))),
    };
  }

  async submit(): Promise<void> {
    const text = this.prompt.value.trim();
    const backend = this.backend();
    if (!text || !backend || this.busy) return;
    this.prompt.value = "";
    const system = byId<HTMLTextAreaElement>("system-prompt").value.trim();
    const turns: ChatTurn[] = [...(system ? [{ role: "system" as const, content: system }] : []), ...this.history];
    turns.push({ role: "user", content: text });
    this.transcript.addUser(text);
    const msg = this.transcript.addAssistant(backend.label.split(" · ")[0]);
    this.abort = new AbortController();
    this.busy = "generating";
    this.update();
    let reading = false;
    try {
      const stats = await backend.reply(turns, this.sampling(), {
        onText: (t) => {
          if (reading) this.progress(null);
          reading = false;
          msg.append(t);
        },
        onPrefill: (done, total) => {
          reading = done < total && !msg.text;
          this.progress(reading ? `Reading the prompt: ${done} of ${total} tokens` : null, done, total);
        },
      }, this.abort.signal);
      msg.finish(stats);
      this.history.push({ role: "user", content: text }, { role: "assistant", content: msg.text });
    } catch (e) {
      msg.fail(e instanceof Error ? e.message : String(e));
      this.prompt.value ||= text;
    } finally {
      this.abort = null;
      this.busy = null;
      this.progress(null);
      this.update();
      this.prompt.focus();
    }
  }

  newChat(): void {
    if (this.busy === "generating") return;
    this.history = [];
    this.transcript.clear();
    this.prompt.focus();
  }

  progress(label: string | null, done = 0, total = 1): void {
    const box = byId("progress");
    box.hidden = label === null;
    if (label === null) return;
    const pct = total > 0 ? Math.min(100, (100 * done) / total) : 0;
    byId("progress-text").textContent = label;
    byId("progress-pct").textContent = `${Math.round(pct)}%`;
    byId("progress-fill").style.width = `${pct}%`;
  }

  /** Enables what can be used now. */
  update(): void {
    const generating = this.busy === "generating";
    this.send.hidden = generating;
    this.stop.hidden = !generating;
    this.send.disabled = !!this.busy || !this.backend() || !this.prompt.value.trim();
    this.prompt.placeholder = this.backend()
      ? "Message the model…"
      : this.mode === "local" ? "Open a model folder to start" : "Connect to a server to start";
    byId<HTMLButtonElement>("open-folder").disabled = this.busy !== null;
    document.body.dataset.busy = this.busy ?? "";
    document.body.dataset.ready = String(!!this.backend());
    // Grow the composer with its text, up to a third of the window.
    this.prompt.style.height = "auto";
    this.prompt.style.height = `${Math.min(this.prompt.scrollHeight, innerHeight / 3)}px`;
  }

  error(e: unknown, key?: string): void {
    const msg = e instanceof FlintError ? e.message : e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    notice(this.notices, "error", msg, key);
  }
}

export function startPlayground(): void {
  const p = new Playground();
  (globalThis as any).flintPlayground = p; // for the console and the browser test
  p.start().catch((e) => p.error(e));
}
