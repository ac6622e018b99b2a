/**
 * The chat page: mode (model in this tab, or the server), settings, composer, progress bar, notices and the
 * conversation being shown. The model is behind `ChatBackend` (local.ts, remote.ts); the panels are
 * models_panel.ts, server_panel.ts and conversations.ts; the transcript is chat_view.ts.
 * @module
 */
import { FlintError } from "../src/errors.ts";
import { type BlobModelSource, cacheModel, checkModelFolder, formatBytes } from "../src/platform/browser.ts";
import type { ChatBackend, ChatTurn, ReplyStats, Sampling } from "./backend.ts";
import { Transcript } from "./chat_view.ts";
import {
  ChatsPanel,
  type Conversation,
  getConversation,
  type Mode,
  newConversation,
  saveConversation,
} from "./conversations.ts";
import { byId, notice, prefs } from "./dom.ts";
import { describeGpu, LocalModel } from "./local.ts";
import { ModelsPanel } from "./models_panel.ts";
import { ProgressBar } from "./progress_bar.ts";
import { AuthError } from "./remote.ts";
import { ServerPanel } from "./server_panel.ts";

// Kept in localStorage across reloads (the server's URL and key: server_panel.ts).
const SETTINGS = [
  "temperature",
  "max-tokens",
  "top-p",
  "top-k",
  "min-p",
  "seed",
  "system-prompt",
  "context-window",
  "kv-cache",
];

class Playground {
  readonly notices = byId("notices");
  readonly transcript = new Transcript(byId("transcript"));
  readonly prompt = byId<HTMLTextAreaElement>("prompt");
  readonly send = byId<HTMLButtonElement>("send");
  readonly stop = byId<HTMLButtonElement>("stop");
  readonly pill = byId("gpu-status");
  readonly bar = new ProgressBar();
  readonly models: ModelsPanel;
  readonly server: ServerPanel;
  readonly chats: ChatsPanel;
  mode: Mode = "local";
  local: LocalModel | null = null;
  /** The conversation shown; null until its first exchange is stored. */
  chat: Conversation | null = null;
  history: ChatTurn[] = [];
  busy: "loading" | "generating" | null = null;
  abort: AbortController | null = null;
  /** A message that hit a 401, sent again once a key is entered. */
  retryText: string | null = null;

  constructor() {
    this.models = new ModelsPanel({
      load: (src, fresh) => this.loadLocal(src, fresh),
      current: () => this.local?.source.name ?? null,
      error: (e) => this.error(e),
    });
    this.server = new ServerPanel(this.notices, {
      changed: () => this.update(),
      pill: (text, kind) => this.mode === "remote" && this.setPill(text, kind),
      authorized: () => {
        if (this.retryText !== null && this.prompt.value.trim() === this.retryText) this.submit();
        this.retryText = null;
      },
    });
    this.chats = new ChatsPanel({
      current: () => this.chat?.id ?? null,
      open: (id) => this.openChat(id),
      deleted: (id) => this.chat?.id === id && this.newChat(),
      newChat: () => this.newChat(),
      idle: () => this.busy !== "generating",
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
    byId("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    this.stop.addEventListener("click", () => this.abort?.abort());
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
      } else if (e.key === "l" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.newChat();
      }
    });
  }

  async start(): Promise<void> {
    const saved = prefs.get("mode") as Mode | null;
    const cached = await this.models.refresh().catch(() => []);
    // Served by `deno task serve`: the server has a model loaded, so that is the quickest start.
    const server = saved ? false : await this.server.probe(1500);
    await this.setMode(saved ?? (server && !cached.length ? "remote" : "local"), false);
    const last = prefs.get("lastModel");
    if (this.mode === "local" && last && cached.some((m) => m.name === last)) {
      await this.models.loadCached(last);
    }
    this.update();
    this.prompt.focus();
  }

  async setMode(mode: Mode, save: boolean): Promise<void> {
    if (this.busy === "generating") return;
    this.mode = mode;
    if (save) prefs.set("mode", mode);
    for (const b of document.querySelectorAll<HTMLElement>("[data-mode]")) {
      b.setAttribute("aria-checked", String(b.dataset.mode === mode));
    }
    byId("local-panel").hidden = mode !== "local";
    byId("remote-panel").hidden = mode !== "remote";
    byId("context-window").closest("label")!.hidden = mode !== "local";
    byId("kv-cache").closest("label")!.hidden = mode !== "local";
    this.notices.querySelector('[data-key="auth"]')?.remove();
    if (mode === "local") this.checkGpu();
    else this.server.connect();
    this.update();
    const id = prefs.get(`chat.${mode}`);
    await (id ? this.openChat(id) : this.newChat());
  }

  /** Status pill and notices: no WebGPU at all, or no shader-f16 (the f32 path still runs). */
  async checkGpu(): Promise<void> {
    if (this.local) return this.setPill(this.local.label, "ok");
    try {
      const g = await describeGpu();
      const label = `${g.adapter} · ${g.f16 ? "f16" : "f32"}`;
      if (this.mode === "local" && !this.local) this.setPill(label, "ok");
      if (!g.f16) {
        notice(
          this.notices,
          "warn",
          "This GPU has no shader-f16: models run with f32 activations. " +
            "Results are the same; it is slower and needs more memory.",
          "f16",
        );
      }
    } catch (e) {
      this.setPill("no WebGPU", "bad");
      notice(
        this.notices,
        "error",
        `${
          (e as Error).message
        }. Models cannot run in this tab; switch to Server mode to use a Flint server.`,
        "gpu",
      );
    }
  }

  setPill(text: string, kind: "ok" | "bad" | "busy"): void {
    this.pill.textContent = text;
    this.pill.dataset.kind = kind;
  }

  async loadLocal(src: BlobModelSource, fresh: boolean): Promise<void> {
    if (this.busy) return;
    this.notices.querySelector('[data-key="load"]')?.remove();
    try {
      await checkModelFolder(src); // before the loaded model is let go
    } catch (e) {
      return this.error(e, "load");
    }
    this.busy = "loading";
    this.update();
    const old = this.local;
    this.local = null;
    await old?.unload();
    this.bar.show("weights", `Loading ${src.name}`, 0, 1);
    this.setPill(`loading ${src.name}…`, "busy");
    let compileTimer: ReturnType<typeof setInterval> | undefined;
    try {
      this.local = await LocalModel.load(src, {
        contextWindow: Number(byId<HTMLSelectElement>("context-window").value),
        kvCache: byId<HTMLSelectElement>("kv-cache").value === "q8" ? "q8" : "act",
        onProgress: (p) => {
          if (p.stage === "weights") {
            const label = `Loading ${src.name}: ${formatBytes(p.done)} of ${formatBytes(p.total)}`;
            return this.bar.show("weights", label, p.done, p.total);
          }
          const t0 = performance.now();
          const label = () => {
            const s = Math.floor((performance.now() - t0) / 1000);
            return `Compiling kernels for ${src.name}…${s ? ` ${s} s` : ""}`;
          };
          this.bar.busy("compile", label());
          compileTimer = setInterval(() => this.bar.busy("compile", label()), 1000);
        },
      });
      clearInterval(compileTimer);
      if (fresh) {
        this.bar.busy("save", `Saving ${src.name} in this browser`);
        await cacheModel(src).catch((e) => this.error(e, "cache"));
      }
      prefs.set("lastModel", src.name);
      this.setPill(this.local.label, "ok");
    } catch (e) {
      this.setPill("no model loaded", "bad");
      this.error(e, "load");
    } finally {
      clearInterval(compileTimer);
      this.busy = null;
      this.bar.hide();
      await this.models.refresh().catch(() => {});
      this.update();
    }
  }

  backend(): ChatBackend | null {
    return this.mode === "local" ? this.local : this.server.remote;
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
    const turns: ChatTurn[] = [
      ...(system ? [{ role: "system" as const, content: system }] : []),
      ...this.history,
    ];
    turns.push({ role: "user", content: text });
    const userEl = this.transcript.addUser(text);
    const label = backend.label.split(" · ")[0];
    const msg = this.transcript.addAssistant(label);
    const mode = this.mode;
    this.abort = new AbortController();
    this.busy = "generating";
    this.update();
    let reading = true;
    try {
      const stats = await backend.reply(turns, this.sampling(), {
        onText: (t) => {
          if (reading) this.bar.hide();
          reading = false;
          msg.append(t);
        },
        onPrefill: (done, total, estimated) => reading && this.bar.prefill(done, total, estimated),
      }, this.abort.signal);
      reading = false;
      msg.finish(stats);
      this.history.push({ role: "user", content: text }, { role: "assistant", content: msg.text });
      await this.store(mode, text, msg.text, label, stats).catch((e) => this.error(e, "chat"));
    } catch (e) {
      reading = false;
      if (e instanceof AuthError) {
        // Not an answer: the exchange is taken back and sent again once the key is entered.
        userEl.remove();
        msg.el.remove();
        this.retryText = text;
        this.server.askForKey(e);
      } else msg.fail(e instanceof Error ? e.message : String(e));
      this.prompt.value ||= text;
    } finally {
      this.abort = null;
      this.busy = null;
      this.bar.hide();
      this.update();
      if (!this.notices.querySelector('[data-key="auth"]')) this.prompt.focus();
    }
  }

  /** Appends a finished exchange to the conversation shown and saves it. */
  async store(mode: Mode, user: string, reply: string, label: string, stats: ReplyStats): Promise<void> {
    if (mode !== this.mode) return;
    this.chat ??= newConversation(mode, user);
    const { tokenIds: _ids, ...kept } = stats;
    this.chat.messages.push({ role: "user", content: user }, {
      role: "assistant",
      content: reply,
      label,
      stats: kept,
    });
    this.chat.updatedAt = Date.now();
    await saveConversation(this.chat);
    prefs.set(`chat.${mode}`, this.chat.id);
    await this.chats.refresh(mode);
  }

  async openChat(id: string): Promise<void> {
    if (this.busy === "generating") return;
    const c = await getConversation(id);
    if (!c || c.mode !== this.mode) return this.newChat();
    this.chat = c;
    this.history = c.messages.map((m) => ({ role: m.role, content: m.content }));
    this.transcript.restore(c.messages);
    prefs.set(`chat.${this.mode}`, c.id);
    await this.chats.refresh(this.mode);
  }

  async newChat(): Promise<void> {
    if (this.busy === "generating") return;
    this.chat = null;
    this.history = [];
    this.transcript.clear();
    prefs.remove(`chat.${this.mode}`);
    this.prompt.focus();
    await this.chats.refresh(this.mode);
  }

  /** Enables what can be used now. */
  update(): void {
    const generating = this.busy === "generating";
    this.send.hidden = generating;
    this.stop.hidden = !generating;
    this.send.disabled = !!this.busy || !this.backend() || !this.prompt.value.trim();
    this.prompt.placeholder = this.backend()
      ? "Message the model…"
      : this.mode === "local"
      ? "Open a model folder to start"
      : "Connect to a server to start";
    byId<HTMLButtonElement>("open-folder").disabled = this.busy !== null;
    for (const b of document.querySelectorAll<HTMLButtonElement>("[data-mode]")) b.disabled = generating;
    this.chats.setEnabled(!generating);
    document.body.dataset.busy = this.busy ?? "";
    document.body.dataset.ready = String(!!this.backend());
    // Grow the composer with its text, up to a third of the window.
    this.prompt.style.height = "auto";
    this.prompt.style.height = `${Math.min(this.prompt.scrollHeight, innerHeight / 3)}px`;
  }

  error(e: unknown, key?: string): void {
    const msg = e instanceof FlintError
      ? e.message
      : e instanceof Error
      ? `${e.name}: ${e.message}`
      : String(e);
    notice(this.notices, "error", msg, key);
  }
}

export function startPlayground(): void {
  const p = new Playground();
  (globalThis as any).flintPlayground = p; // for the console and the browser test
  p.start().catch((e) => p.error(e));
}
