/**
 * The few DOM helpers the pages share. No framework: elements are made with `h` and updated in place.
 * @module
 */

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | number | boolean | ((e: any) => void) | undefined>;

/** `h("button", { class: "primary", onclick: f }, "Send")`; `on*` keys become listeners. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

/** The element with this id, typed; a missing id is a bug in the page, so it throws. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`page has no #${id}`);
  return el as T;
}

/** A dismissable notice at the top of the page ("error" stays until closed, "info" too). */
export function notice(
  box: HTMLElement,
  kind: "error" | "info" | "warn",
  text: string,
  key?: string,
): HTMLElement {
  if (key) box.querySelector(`[data-key="${key}"]`)?.remove();
  const el = h(
    "div",
    { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", "data-key": key },
    h("span", {}, text),
    h("button", {
      type: "button",
      class: "close",
      "aria-label": "Dismiss",
      onclick: () => el.remove(),
    }, "×"),
  );
  box.append(el);
  return el;
}

/** Stored UI preferences (mode, settings), namespaced; storage errors (private mode) are ignored. */
export const prefs = {
  get(key: string): string | null {
    try {
      return localStorage.getItem(`flint.${key}`);
    } catch {
      return null;
    }
  },
  set(key: string, value: string): void {
    try {
      localStorage.setItem(`flint.${key}`, value);
    } catch { /* private mode */ }
  },
  remove(key: string): void {
    try {
      localStorage.removeItem(`flint.${key}`);
    } catch { /* private mode */ }
  },
};
