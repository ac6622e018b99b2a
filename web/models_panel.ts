/**
 * Local mode's model panel: open a folder (directory picker, `<input webkitdirectory>` or a drop), list the
 * models saved in this browser with their sizes, load or delete them. Loading validates through the engine's
 * own loader, so a bad folder gets the same LoaderError text as the CLI; only a folder that loaded is saved.
 * Under the list: whether this browser keeps them (persistent storage) and how much storage they take.
 * @module
 */
import {
  type BlobModelSource,
  type CachedModel,
  deleteCachedModel,
  formatBytes,
  hasDirectoryPicker,
  listCachedModels,
  loadCachedModel,
  pickModelFolder,
  sourceFromDrop,
  sourceFromFiles,
  storageStatus,
} from "../src/platform/browser.ts";
import { byId, h } from "./dom.ts";

export interface ModelsPanelHooks {
  /** Loads a folder; `fresh` is true for a newly picked one (to be saved once it loads). */
  load(src: BlobModelSource, fresh: boolean): Promise<void>;
  /** The model currently loaded, by name (highlighted in the list). */
  current(): string | null;
  error(e: unknown): void;
}

export class ModelsPanel {
  readonly #list = byId<HTMLUListElement>("cached-models");
  readonly #input = byId<HTMLInputElement>("folder-input");

  constructor(readonly hooks: ModelsPanelHooks) {
    byId("open-folder").addEventListener("click", () => this.#open());
    this.#input.addEventListener("change", () => {
      const files = [...(this.#input.files ?? [])];
      this.#input.value = "";
      if (files.length) this.#run(() => this.hooks.load(sourceFromFiles(files), true));
    });
    const drop = byId("local-panel");
    drop.addEventListener("dragover", (e) => {
      e.preventDefault();
      drop.classList.add("dragging");
    });
    drop.addEventListener("dragleave", () => drop.classList.remove("dragging"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("dragging");
      if (e.dataTransfer) {
        this.#run(async () => {
          const src = await sourceFromDrop(e.dataTransfer!);
          if (src) await this.hooks.load(src, true);
        });
      }
    });
  }

  /** Re-reads the IndexedDB list. */
  async refresh(): Promise<CachedModel[]> {
    const models = await listCachedModels();
    const cur = this.hooks.current();
    this.#list.replaceChildren(
      ...(models.length
        ? models.map((m) => this.#item(m, m.name === cur))
        : [h("li", { class: "empty" }, "No models saved yet.")]),
    );
    await this.#showStorage(models.length > 0);
    return models;
  }

  /** Persistent or not (asked for when a model is saved), and the storage estimate. */
  async #showStorage(any: boolean): Promise<void> {
    const el = byId("storage-status");
    el.hidden = !any;
    if (!any) return;
    const s = await storageStatus();
    const kept = s.persisted === null
      ? "Storage"
      : s.persisted
      ? "Persistent storage: kept until you delete them"
      : "Not persistent: the browser may remove them when space runs low";
    const used = s.usage !== null && s.quota
      ? ` · ${formatBytes(s.usage)} used of ${formatBytes(s.quota)} (the browser's estimate)`
      : "";
    el.textContent = `${kept}${used}.`;
    el.dataset.persisted = String(s.persisted);
  }

  /** Loads a saved model by name; false when it is not saved (any more). */
  async loadCached(name: string): Promise<boolean> {
    const src = await loadCachedModel(name);
    if (!src) return false;
    await this.#run(() => this.hooks.load(src, false));
    return true;
  }

  #open(): void {
    if (!hasDirectoryPicker()) {
      this.#input.click();
      return;
    }
    this.#run(async () => {
      const src = await pickModelFolder();
      if (src) await this.hooks.load(src, true);
    });
  }

  #item(m: CachedModel, active: boolean): HTMLLIElement {
    const when = new Date(m.savedAt).toLocaleDateString(undefined, { month: "short", day: "numeric" });
    return h(
      "li",
      { class: active ? "active" : undefined },
      h(
        "button",
        {
          type: "button",
          class: "model",
          title: `Load ${m.name}`,
          "aria-current": active ? "true" : undefined,
          onclick: () => this.loadCached(m.name),
        },
        h("span", { class: "name" }, m.name),
        h("span", { class: "size" }, `${formatBytes(m.bytes)} · ${m.files} files · ${when}`),
      ),
      h("button", {
        type: "button",
        class: "icon",
        title: `Delete ${m.name} from this browser`,
        "aria-label": `Delete ${m.name}`,
        onclick: () =>
          this.#run(async () => {
            if (!confirm(`Delete ${m.name} (${formatBytes(m.bytes)}) from this browser?`)) return;
            await deleteCachedModel(m.name);
            await this.refresh();
          }),
      }, "×"),
    );
  }

  async #run(f: () => Promise<void>): Promise<void> {
    try {
      await f();
    } catch (e) {
      this.hooks.error(e);
    }
  }
}
