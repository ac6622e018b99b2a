/**
 * The kernel lab page: the browser twin of `deno task kernel`. Pick a kernel, edit its WGSL, run: the
 * edited shader goes through the kernel's real host wrapper (src/lab, `withShader`), is compared with the
 * float64 reference, and only when it passes is it timed.
 * @module
 */
import { FlintError } from "../src/errors.ts";
import { Gpu } from "../src/gpu/device.ts";
import { type KernelCase, parseShape, resolveShape, type Shape } from "../src/lab/case.ts";
import { CASES } from "../src/lab/cases.ts";
import { describeReport } from "../src/lab/compare.ts";
import { withShader } from "../src/lab/harness.ts";
import { type BenchReport, runCase } from "../src/lab/run.ts";
import { shaderSource } from "../src/platform/mod.ts";
import { byId, h, notice } from "./dom.ts";

const SEED = 1;

class Lab {
  readonly source = byId<HTMLTextAreaElement>("source");
  readonly shape = byId<HTMLInputElement>("shape");
  readonly result = byId("result");
  readonly fileSelect = byId<HTMLSelectElement>("kernel-file");
  gpu: Gpu | null = null;
  kernel: KernelCase = CASES[0];
  file = CASES[0].files[0];
  /** The user's text per file, kept while switching kernels. */
  readonly edits = new Map<string, string>();
  readonly originals = new Map<string, string>();
  running = false;

  async start(): Promise<void> {
    byId("kernels").replaceChildren(
      ...CASES.map((c) =>
        h(
          "li",
          {},
          h(
            "button",
            {
              type: "button",
              "data-kernel": c.files[0],
              onclick: () => this.select(c),
            },
            h("span", {}, c.files[0].replace(/\.wgsl$/, "")),
            c.files.length > 1 ? h("span", { class: "file" }, `+${c.files.length - 1}`) : null,
          ),
        )
      ),
    );
    byId("run").addEventListener("click", () => this.run());
    byId("reset").addEventListener("click", () => this.reset());
    byId("preset").addEventListener("change", () => this.fillShape());
    this.fileSelect.addEventListener("change", () => this.show(this.fileSelect.value));
    this.source.addEventListener("input", () => {
      this.edits.set(this.file, this.source.value);
      this.markEdited();
    });
    this.source.addEventListener("keydown", (e) => indentOnTab(this.source, e));
    document.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.run();
      }
    });
    const want = decodeURIComponent(location.hash.slice(1));
    await this.select(CASES.find((c) => c.files[0].replace(/\.wgsl$/, "") === want) ?? CASES[0]);
    try {
      this.gpu = await Gpu.create();
      const g = this.gpu.info;
      byId("gpu-status").textContent = `${g.adapter} · ${g.f16 ? "f16" : "f32"}${
        g.subgroups ? " · subgroups" : ""
      }`;
      byId("gpu-status").dataset.kind = "ok";
    } catch (e) {
      byId("gpu-status").textContent = "no WebGPU";
      byId("gpu-status").dataset.kind = "bad";
      notice(byId("notices"), "error", `${(e as Error).message}. Kernels cannot run in this tab.`, "gpu");
    }
  }

  async select(c: KernelCase): Promise<void> {
    this.kernel = c;
    history.replaceState(null, "", `#${c.files[0].replace(/\.wgsl$/, "")}`);
    for (const b of document.querySelectorAll<HTMLElement>("[data-kernel]")) {
      b.setAttribute("aria-current", String(b.dataset.kernel === c.files[0]));
    }
    byId("kernel-title").textContent = c.files[0];
    byId("kernel-summary").textContent = `${c.summary}. Shape keys: ` +
      Object.entries(c.keys).map(([k, doc]) => `${k} (${doc})`).join("; ") + ".";
    this.fileSelect.hidden = c.files.length < 2;
    this.fileSelect.replaceChildren(...c.files.map((f) => new Option(f, f)));
    this.fillShape();
    await this.show(c.files[0]);
    this.result.dataset.state = "idle";
    this.result.replaceChildren(h("span", { class: "hint" }, "Not run yet."));
  }

  fillShape(): void {
    const preset = byId<HTMLSelectElement>("preset").value === "defaults"
      ? this.kernel.defaults
      : this.kernel.small;
    this.shape.value = Object.entries({ ...this.kernel.defaults, ...preset }).map(([k, v]) => `${k}=${v}`)
      .join(",");
  }

  async show(file: string): Promise<void> {
    this.file = file;
    this.fileSelect.value = file;
    if (!this.originals.has(file)) this.originals.set(file, await shaderSource(file));
    this.source.value = this.edits.get(file) ?? this.originals.get(file)!;
    this.markEdited();
  }

  reset(): void {
    this.edits.delete(this.file);
    this.source.value = this.originals.get(this.file)!;
    this.markEdited();
  }

  markEdited(): void {
    const edited = this.kernel.files.filter((f) =>
      this.edits.has(f) && this.edits.get(f) !== this.originals.get(f)
    );
    byId("edited").textContent = edited.length ? `edited: ${edited.join(", ")}` : "shipped shader";
  }

  async run(): Promise<void> {
    if (this.running || !this.gpu) return;
    this.running = true;
    byId<HTMLButtonElement>("run").disabled = true;
    this.result.dataset.state = "running";
    this.result.replaceChildren(h("span", { class: "hint" }, "Checking against the float64 reference…"));
    const gpu = this.gpu, c = this.kernel;
    try {
      const shape: Shape = resolveShape(c, parseShape(this.shape.value));
      const iters = Math.max(
        1,
        Math.min(200, Math.floor(Number(byId<HTMLInputElement>("iters").value) || 10)),
      );
      const edited = c.files.filter((f) => this.edits.has(f) && this.edits.get(f) !== this.originals.get(f));
      // Every edited file of the case is swapped in for both phases, then the shipped text is put back.
      const withEdits = <T>(fn: () => Promise<T>, i = 0): Promise<T> =>
        i === edited.length
          ? fn()
          : withShader(gpu, edited[i], this.edits.get(edited[i])!, () => withEdits(fn, i + 1));
      const check = await withEdits(() => runCase(gpu, c, { shape, seed: SEED, iters: 0 }));
      if (!check.ok) return this.render(check, "fail");
      this.result.replaceChildren(h("span", { class: "hint" }, `Correct. Timing ${iters} runs…`));
      const bench = await withEdits(() => runCase(gpu, c, { shape, seed: SEED, iters, check: false }));
      this.render({ ...bench, outputs: check.outputs, ok: true }, "pass");
    } catch (e) {
      this.result.dataset.state = "error";
      const msg = e instanceof FlintError || e instanceof Error ? e.message : String(e);
      this.result.replaceChildren(h("div", { class: "verdict" }, "Error"), h("pre", {}, msg));
    } finally {
      this.running = false;
      byId<HTMLButtonElement>("run").disabled = false;
    }
  }

  /** Renders a report: verdict, per-output comparison, and the timing (only for a pass). */
  render(r: BenchReport, state: "pass" | "fail"): void {
    this.result.dataset.state = state;
    const parts: Node[] = [
      h(
        "div",
        { class: "verdict" },
        state === "pass"
          ? `PASS: matches the float64 reference (${r.act} activations, seed ${r.seed})`
          : "FAIL: does not match the float64 reference, so it was not timed",
      ),
    ];
    if (r.timing) {
      const ms = r.timing.medianMs;
      const row = (k: string, v: string) => h("tr", {}, h("th", {}, k), h("td", {}, v));
      parts.push(
        h(
          "table",
          {},
          row(
            "median",
            `${fmt(ms)} ms per run (${r.timing.samples.length} runs, ${
              r.timing.method === "timestamps" ? "GPU timestamps" : "wall clock"
            })`,
          ),
          row("memory", `${fmt(r.cost.bytes / 1e6)} MB → ${fmt(r.cost.bytes / (ms * 1e6))} GB/s`),
          r.cost.flops
            ? row("compute", `${fmt(r.cost.flops / 1e9)} GFLOP → ${fmt(r.cost.flops / (ms * 1e6))} GFLOP/s`)
            : null,
        ),
      );
      this.result.dataset.ms = String(ms);
    }
    const text = [...r.outputs.map(describeReport), ...r.deviceErrors.map((e) => `device error: ${e}`)].join(
      "\n",
    );
    parts.push(h("pre", {}, text));
    this.result.replaceChildren(...parts);
  }
}

/** Tab indents inside the editor; Escape first lets Tab move focus on (keyboard users are not trapped). */
let escaped = false;
function indentOnTab(ta: HTMLTextAreaElement, e: KeyboardEvent): void {
  if (e.key === "Escape") escaped = true;
  if (e.key !== "Tab" || e.shiftKey || e.ctrlKey || e.altKey || escaped) {
    if (e.key !== "Escape") escaped = false;
    return;
  }
  e.preventDefault();
  ta.setRangeText("  ", ta.selectionStart, ta.selectionEnd, "end");
  ta.dispatchEvent(new Event("input"));
}

function fmt(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 0.01 ? v.toFixed(2) : v.toExponential(2);
}

export function startLab(): void {
  const lab = new Lab();
  (globalThis as any).flintLab = lab;
  lab.start().catch((e) => notice(byId("notices"), "error", String((e as Error).message ?? e)));
}
