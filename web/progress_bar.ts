/**
 * The progress bar above the composer, for a model load (weights read, then kernel compilation: no
 * measure, so the bar is indeterminate) and for a prompt being read. `#progress` carries what a test or a
 * screen reader needs: `data-stage`, and `aria-valuenow` (percent; absent while indeterminate).
 * @module
 */
import { byId } from "./dom.ts";

export type ProgressStage = "weights" | "compile" | "save" | "prefill";

export class ProgressBar {
  readonly #box = byId("progress");
  readonly #text = byId("progress-text");
  readonly #pct = byId("progress-pct");
  readonly #fill = byId("progress-fill");
  /** The prompt's progress shown so far: a prompt's bar never goes backwards. */
  #prefillShown = 0;

  /** A determinate stage: `done` of `total`. */
  show(stage: ProgressStage, label: string, done: number, total: number): void {
    const pct = total > 0 ? Math.min(100, Math.max(0, (100 * done) / total)) : 0;
    this.#set(stage, label);
    this.#box.classList.remove("indeterminate");
    this.#box.setAttribute("aria-valuenow", String(Math.round(pct * 10) / 10));
    this.#pct.textContent = `${Math.floor(pct)}%`;
    this.#fill.style.width = `${pct}%`;
  }

  /** A stage without a measure (kernel compilation): a moving bar and the seconds spent. */
  busy(stage: ProgressStage, label: string): void {
    this.#set(stage, label);
    this.#box.classList.add("indeterminate");
    this.#box.removeAttribute("aria-valuenow");
    this.#pct.textContent = "";
    this.#fill.style.width = "";
  }

  /**
   * A prompt being read: `processed` of `total` tokens, `estimated` between real reports. Shown only while
   * reading is under way; the real end hides it (the reply's text takes over).
   */
  prefill(processed: number, total: number, estimated: boolean): void {
    if (!estimated && processed >= total) return this.hide();
    const shown = Math.max(this.#prefillShown, Math.min(processed, total - 1));
    this.#prefillShown = shown;
    const label = `Reading the prompt: ${estimated ? "about " : ""}${shown} of ${total} tokens`;
    this.show("prefill", label, shown, total);
  }

  hide(): void {
    this.#box.hidden = true;
    this.#box.classList.remove("indeterminate");
    delete this.#box.dataset.stage;
    this.#box.removeAttribute("aria-valuenow");
    this.#prefillShown = 0;
  }

  #set(stage: ProgressStage, label: string): void {
    this.#box.hidden = false;
    this.#box.dataset.stage = stage;
    this.#box.setAttribute("aria-valuetext", label);
    this.#text.textContent = label;
  }
}
