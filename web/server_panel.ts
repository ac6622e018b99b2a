/**
 * Server mode's panel: the server's URL (default: this page's origin; another origin needs the server's
 * `--cors`), its API key, and the model list. The key is kept in localStorage per server origin; when the
 * API answers 401 an inline form asks for it, and the connection (or the message that hit the 401) is
 * tried again with it.
 * @module
 */
import { byId, h, notice, prefs } from "./dom.ts";
import { AuthError, listServerModels, RemoteModel } from "./remote.ts";

export interface ServerPanelHooks {
  /** The connection changed (connected, lost, other model). */
  changed(): void;
  pill(text: string, kind: "ok" | "bad" | "busy"): void;
  /** A key was entered in the form and the server took it. */
  authorized(): void;
}

export class ServerPanel {
  remote: RemoteModel | null = null;
  readonly #url = byId<HTMLInputElement>("server-url");
  readonly #key = byId<HTMLInputElement>("api-key");
  readonly #select = byId<HTMLSelectElement>("server-model");
  #connecting = 0;

  constructor(readonly notices: HTMLElement, readonly hooks: ServerPanelHooks) {
    this.#url.placeholder = location.origin;
    this.#url.value = prefs.get("server-url") ?? "";
    this.#key.value = this.apiKey();
    this.#url.addEventListener("change", () => {
      prefs.set("server-url", this.#url.value.trim());
      this.#key.value = this.apiKey();
      this.connect();
    });
    this.#key.addEventListener("change", () => {
      this.#storeKey(this.#key.value.trim());
      this.connect();
    });
    this.#select.addEventListener("change", () => this.connect());
  }

  /** The server root, ending with "/": the URL setting, or this page's origin. */
  base(): string {
    const v = this.#url.value.trim();
    if (!v) return new URL("/", location.origin).href;
    return new URL(
      /^[a-z][\w+.-]*:\/\//i.test(v) ? v.replace(/\/?$/, "/") : `http://${v.replace(/\/?$/, "/")}`,
    ).href;
  }

  /** The key kept for this server ("" for none). */
  apiKey(): string {
    return prefs.get(this.#keyName()) ?? "";
  }

  /** Whether a Flint-like server answers at all (a 401 counts: it is there, it wants a key). */
  async probe(timeoutMs: number): Promise<boolean> {
    try {
      await listServerModels(this.base(), { apiKey: this.apiKey(), signal: AbortSignal.timeout(timeoutMs) });
      return true;
    } catch (e) {
      return e instanceof AuthError;
    }
  }

  async connect(): Promise<void> {
    const run = ++this.#connecting; // a later call wins over one still waiting
    let base: string;
    try {
      base = this.base();
    } catch {
      this.#fail(`"${this.#url.value}" is not a URL: give the server's address, e.g. http://127.0.0.1:8080.`);
      return this.hooks.changed();
    }
    const key = this.apiKey();
    this.hooks.pill(`connecting to ${new URL(base).host}…`, "busy");
    try {
      const ids = await listServerModels(base, { apiKey: key, signal: AbortSignal.timeout(5000) });
      if (run !== this.#connecting) return;
      const want = ids.includes(this.#select.value) ? this.#select.value : ids[0];
      this.#select.replaceChildren(...ids.map((id) => new Option(id, id, false, id === want)));
      this.remote = ids.length ? new RemoteModel(base, want, key) : null;
      this.hooks.pill(this.remote ? this.remote.label : "server has no model", this.remote ? "ok" : "bad");
      for (const k of ["server", "auth"]) this.notices.querySelector(`[data-key="${k}"]`)?.remove();
    } catch (e) {
      if (run !== this.#connecting) return;
      if (e instanceof AuthError) {
        this.#disconnected("API key needed");
        this.askForKey(e);
      } else {
        const cross = new URL(base).origin !== location.origin;
        const hint = cross ? ` If it runs on another origin, start it with --cors ${location.origin}.` : "";
        this.#fail(
          `No Flint server at ${base} (${
            (e as Error).message
          }). Start one with "deno task serve", or set its URL.${hint}`,
        );
      }
    }
    this.hooks.changed();
  }

  /** The inline key form, at the top of the chat (replaces an earlier one). */
  askForKey(e: AuthError): void {
    this.notices.querySelector('[data-key="auth"]')?.remove();
    const host = new URL(this.base()).host;
    const input = h("input", {
      type: "password",
      id: "key-input",
      placeholder: "API key",
      autocomplete: "off",
      spellcheck: "false",
      "aria-label": `API key for ${host}`,
    });
    const form = h(
      "form",
      { class: "notice warn keyform", "data-key": "auth", "aria-label": "API key" },
      h(
        "span",
        {},
        e.keySent
          ? `The server at ${host} rejected the API key. Enter the right one:`
          : `The server at ${host} needs an API key (its --api-key):`,
      ),
      input,
      h("button", { type: "submit", class: "primary" }, "Connect"),
      h(
        "button",
        { type: "button", class: "close", "aria-label": "Dismiss", onclick: () => form.remove() },
        "×",
      ),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const key = input.value.trim();
      if (!key) return input.focus();
      this.#storeKey(key);
      this.#key.value = key;
      form.remove();
      await this.connect();
      if (this.remote) this.hooks.authorized();
    });
    this.notices.prepend(form);
    input.focus();
  }

  #keyName(): string {
    let origin: string;
    try {
      origin = new URL(this.base()).origin;
    } catch {
      origin = "invalid";
    }
    return `api-key@${origin}`;
  }

  #storeKey(key: string): void {
    if (key) prefs.set(this.#keyName(), key);
    else prefs.remove(this.#keyName());
  }

  #disconnected(pill: string): void {
    this.remote = null;
    this.#select.replaceChildren(new Option("(not connected)", ""));
    this.hooks.pill(pill, "bad");
  }

  #fail(message: string): void {
    this.#disconnected("server unreachable");
    notice(this.notices, "error", message, "server");
  }
}
