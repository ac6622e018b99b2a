/**
 * Conversations kept in IndexedDB (idb-keyval, a database of their own beside the model cache), one list per
 * mode (model in this tab, or the server), and the sidebar panel that lists them: new, switch, delete. The
 * title is the first user message. A conversation is stored once it has a finished exchange.
 * @module
 */
import { createStore, del, get, set, type UseStore, values } from "idb-keyval";
import type { ReplyStats } from "./backend.ts";
import { byId, h } from "./dom.ts";

export type Mode = "local" | "remote";

export interface StoredMessage {
  role: "user" | "assistant";
  content: string;
  /** Assistant messages: who answered (model name) and the stats line. */
  label?: string;
  stats?: ReplyStats;
}

export interface Conversation {
  id: string;
  mode: Mode;
  title: string;
  createdAt: number;
  updatedAt: number;
  messages: StoredMessage[];
}

let store: UseStore | null = null;
const db = () => (store ??= createStore("flint-chats", "conversations"));

/** Conversations of one mode, most recently updated first. Storage errors (private mode) give none. */
export async function listConversations(mode: Mode): Promise<Conversation[]> {
  const all = await values<Conversation>(db()).catch(() => []);
  return all.filter((c) => c.mode === mode).sort((a, b) => b.updatedAt - a.updatedAt);
}

export async function getConversation(id: string): Promise<Conversation | null> {
  return (await get<Conversation>(id, db()).catch(() => undefined)) ?? null;
}

export async function saveConversation(c: Conversation): Promise<void> {
  await set(c.id, c, db());
}

export async function deleteConversation(id: string): Promise<void> {
  await del(id, db());
}

/** A new, unsaved conversation whose title comes from its first user message. */
export function newConversation(mode: Mode, firstMessage: string): Conversation {
  const now = Date.now();
  const id = globalThis.crypto?.randomUUID?.() ?? `${now}-${Math.random().toString(36).slice(2)}`;
  return { id, mode, title: titleOf(firstMessage), createdAt: now, updatedAt: now, messages: [] };
}

/** The first line of the message, cut to fit the sidebar. */
export function titleOf(text: string): string {
  const line = text.trim().split("\n")[0].replace(/\s+/g, " ");
  return line.length > 60 ? `${line.slice(0, 59)}…` : line || "Untitled";
}

export interface ChatsPanelHooks {
  /** The conversation shown now (highlighted), or null for an unsaved new one. */
  current(): string | null;
  open(id: string): void;
  /** Called after the conversation was deleted from storage. */
  deleted(id: string): void;
  newChat(): void;
  /** Whether switching is allowed now (not while a reply streams). */
  idle(): boolean;
  error(e: unknown): void;
}

/** The sidebar list of one mode's conversations. */
export class ChatsPanel {
  readonly #list = byId<HTMLUListElement>("chats");
  #mode: Mode = "local";

  constructor(readonly hooks: ChatsPanelHooks) {
    byId("new-chat").addEventListener("click", () => hooks.newChat());
  }

  async refresh(mode: Mode = this.#mode): Promise<Conversation[]> {
    this.#mode = mode;
    const chats = await listConversations(mode);
    const cur = this.hooks.current();
    this.#list.replaceChildren(
      ...(chats.length
        ? chats.map((c) => this.#item(c, c.id === cur))
        : [h("li", { class: "empty" }, "No saved chats yet.")]),
    );
    this.setEnabled(this.hooks.idle());
    return chats;
  }

  /** Disables switching and deleting while a reply streams. */
  setEnabled(on: boolean): void {
    for (const b of this.#list.querySelectorAll("button")) b.disabled = !on;
    byId<HTMLButtonElement>("new-chat").disabled = !on;
  }

  #item(c: Conversation, active: boolean): HTMLLIElement {
    const when = new Date(c.updatedAt).toLocaleDateString(undefined, { month: "short", day: "numeric" });
    const turns = c.messages.filter((m) => m.role === "user").length;
    return h(
      "li",
      { class: active ? "active" : undefined, "data-chat-id": c.id },
      h(
        "button",
        {
          type: "button",
          class: "chat-item",
          title: c.title,
          "aria-current": active ? "true" : undefined,
          onclick: () => this.hooks.open(c.id),
        },
        h("span", { class: "name" }, c.title),
        h("span", { class: "size" }, `${turns} message${turns === 1 ? "" : "s"} · ${when}`),
      ),
      h("button", {
        type: "button",
        class: "icon",
        title: `Delete "${c.title}"`,
        "aria-label": `Delete chat ${c.title}`,
        onclick: async () => {
          if (!confirm(`Delete the chat "${c.title}"?`)) return;
          try {
            await deleteConversation(c.id);
            this.hooks.deleted(c.id);
            await this.refresh();
          } catch (e) {
            this.hooks.error(e);
          }
        },
      }, "×"),
    );
  }
}
