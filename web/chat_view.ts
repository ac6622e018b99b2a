/**
 * The transcript: user and assistant messages, streamed text rendered as Markdown at most once per frame,
 * and a stats line (tokens, tok/s, time to first token, prompt tokens and how many came from the prefix
 * cache) under each finished reply; a count that is not known (a server stream stopped before its usage
 * report) is said to be unknown, never guessed.
 * @module
 */
import type { ReplyStats } from "./backend.ts";
import type { StoredMessage } from "./conversations.ts";
import { h } from "./dom.ts";
import { renderMarkdown } from "./markdown.ts";

export class Transcript {
  constructor(readonly el: HTMLElement) {}

  clear(): void {
    this.el.querySelectorAll(".msg").forEach((m) => m.remove());
    this.el.classList.remove("started");
  }

  /** Shows a stored conversation: its messages, each reply with its stats line. */
  restore(messages: StoredMessage[]): void {
    this.clear();
    for (const m of messages) {
      if (m.role === "user") this.addUser(m.content);
      else {
        const msg = this.addAssistant(m.label ?? "assistant");
        msg.append(m.content);
        if (m.stats) msg.finish(m.stats);
        else msg.settle();
      }
    }
  }

  addUser(text: string): HTMLElement {
    const el = h("article", { class: "msg user", "aria-label": "You" }, h("div", { class: "body" }, text));
    this.#add(el);
    return el;
  }

  addAssistant(label: string): AssistantMessage {
    const body = h("div", { class: "body" });
    const meta = h("div", { class: "meta" }, h("span", { class: "typing", "aria-label": "generating" }));
    const el = h(
      "article",
      { class: "msg assistant", "data-state": "streaming", "aria-label": label },
      h("div", { class: "who" }, label),
      body,
      meta,
    );
    this.#add(el);
    return new AssistantMessage(el, body, meta, () => this.#stick());
  }

  #add(el: HTMLElement): void {
    this.el.classList.add("started");
    const follow = this.#atBottom();
    this.el.append(el);
    if (follow) this.#stick(true);
  }

  #atBottom(): boolean {
    return this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 80;
  }

  /** Keeps the newest text in view unless the reader scrolled up. */
  #stick(force = false): void {
    if (force || this.#atBottom()) this.el.scrollTop = this.el.scrollHeight;
  }
}

export class AssistantMessage {
  text = "";
  #frame = 0;
  constructor(
    readonly el: HTMLElement,
    readonly body: HTMLElement,
    readonly meta: HTMLElement,
    readonly scroll: () => void,
  ) {}

  append(text: string): void {
    this.text += text;
    this.#frame ||= requestAnimationFrame(() => this.#render());
  }

  finish(s: ReplyStats): void {
    this.#render();
    const n = s.completionTokens;
    const parts = [
      n === null ? "token count unknown" : `${n} token${n === 1 ? "" : "s"}`,
      s.decodeTps ? `${s.decodeTps.toFixed(1)} tok/s` : null,
      s.ttftMs ? `first token ${Math.round(s.ttftMs)} ms` : null,
      s.cachedTokens && s.promptTokens
        ? `${s.cachedTokens} of ${s.promptTokens} prompt tokens cached`
        : s.promptTokens
        ? `prompt ${s.promptTokens} tokens`
        : null,
      s.finishReason === "length" ? "hit max tokens" : s.finishReason === "cancelled" ? "stopped" : null,
    ].filter(Boolean);
    const title = n === null ? "Stopped before the server reported its token counts" : undefined;
    this.meta.replaceChildren(h("span", { class: "stats", title }, parts.join(" · ")));
    this.el.dataset.state = s.finishReason === "cancelled" ? "stopped" : "done";
    if (s.tokenIds) this.el.dataset.tokenIds = s.tokenIds.join(",");
    this.el.dataset.completionTokens = n === null ? "" : String(n);
    this.el.dataset.promptTokens = s.promptTokens === null ? "" : String(s.promptTokens);
    this.el.dataset.cachedTokens = s.cachedTokens == null ? "" : String(s.cachedTokens);
    this.el.dataset.tps = s.decodeTps === null ? "" : String(s.decodeTps);
    this.el.dataset.ttftMs = s.ttftMs === null ? "" : String(s.ttftMs);
  }

  /** Ends a restored reply that has no stats. */
  settle(): void {
    this.#render();
    this.meta.replaceChildren();
    this.el.dataset.state = "done";
  }

  fail(message: string): void {
    this.#render();
    this.meta.replaceChildren(h("span", { class: "error", role: "alert" }, message));
    this.el.dataset.state = "error";
  }

  #render(): void {
    cancelAnimationFrame(this.#frame);
    this.#frame = 0;
    renderMarkdown(this.body, this.text);
    this.scroll();
  }
}
