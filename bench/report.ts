/**
 * The benchmark's outputs: the result types (the JSON written to bench/results/), the Markdown tables and
 * a hand-written SVG bar chart (prefill and decode: Flint, PyTorch, the llama.cpp bar, targets dashed).
 * @module
 */
import type { Dims } from "../src/engine/resources.ts";
import type { TorchBaseline } from "./baseline.ts";
import type { KernelFigure } from "./kernels.ts";
import type { E2EResult } from "./measure.ts";
import type { Ceilings } from "../src/lab/probes.ts";
import type { Bar, ModelCost } from "./roofline.ts";

export interface RooflineRow {
  label: string;
  achievedTps: number;
  /** Bytes (decode) or FLOPs (prefill) per token. */
  perToken: number;
  ceilingTps: number;
  fraction: number;
}

export interface ModelResult {
  model: string;
  source: string;
  dims: Dims;
  quantization: string;
  contextWindow: number;
  weightBytes: number;
  cost: ModelCost;
  loadMs: number;
  compileMs: number;
  e2e: E2EResult;
  memory: Record<string, number>;
  kernels: KernelFigure[];
  roofline: { prefill: RooflineRow[]; prefillAtDepth: RooflineRow[]; decode: RooflineRow[] };
  baseline: TorchBaseline | null;
  bar: { llamacpp: Bar; target: Bar } | null;
}

/**
 * The lab's probe results, and the ceilings the roofline uses (matmul: the faster of f32 and f16; int8: the
 * integer dot-product matmul, for the int8-x linears).
 */
export interface BenchCeilings {
  readGBs: number;
  matmulGFLOPs: number;
  int8GOps: number | null;
  lab: Ceilings;
}

export interface BenchResult {
  version: 1;
  date: string;
  command: string;
  machine: Record<string, unknown>;
  settings: Record<string, unknown>;
  ceilings: BenchCeilings | null;
  models: ModelResult[];
}

/** Numbers at a useful precision: 12,345 · 123 · 12.3 · 1.23 (a software adapter's rates are small). */
const f0 = (x: number | undefined) => {
  if (x === undefined || !Number.isFinite(x)) return "–";
  const a = Math.abs(x);
  return a >= 100 || a === 0 ? Math.round(x).toLocaleString("en-US") : a >= 10 ? x.toFixed(1) : x.toFixed(2);
};
const f1 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(1));
const pct = (
  x: number | undefined,
) => (x === undefined || !Number.isFinite(x) ? "–" : `${(100 * x).toFixed(0)}%`);
const gib = (
  b: number,
) => (b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(2)} GiB` : `${(b / 2 ** 20).toFixed(1)} MiB`);

export function kTok(n: number): string {
  return n >= 1024 && n % 1024 === 0 ? `${n / 1024}k` : String(n);
}

/**
 * A prefill-at-depth bar (llama.cpp's pp512 at depth d: 512 tokens from position d) applies to the measured
 * chunk window that holds position d, not to a shallower one (a 16k prompt's window is 12k–14k).
 */
export function atDepth(
  b: { prefillAtDepth: Record<number, number> } | undefined,
  p: { from: number; to: number },
): number | undefined {
  const d = Object.keys(b?.prefillAtDepth ?? {}).map(Number).find((d) => p.from <= d && d < p.to);
  return d === undefined ? undefined : b!.prefillAtDepth[d];
}

/** One row per figure: ours, roofline, PyTorch and the ratio, the llama.cpp bar and the target. */
export function markdown(r: BenchResult): string {
  const out: string[] = [];
  const c = r.ceilings;
  out.push(`# Flint benchmark — ${r.machine.adapter}`, "");
  out.push(
    `\`${r.command}\`  `,
    `${r.date}; ${Object.entries(r.settings).map(([k, v]) => `${k} ${v}`).join(", ")}`,
    "",
  );
  if (c) {
    out.push(
      `Ceilings measured in this run (src/lab/probes.ts): streaming read **${
        f0(c.readGBs)
      } GB/s** (workgroup ${c.lab.readWG}), ` +
        `tiled matmul **${f0(c.lab.f32GFlops)} GFLOP/s** f32, ${
          f0(c.lab.f16GFlops ?? undefined)
        } f16 (the roofline uses the faster), ` +
        `**${
          f0(c.lab.int8GOps ?? undefined)
        } GOP/s** int8 with integer dot products (for the int8-x linears); ` +
        `timing by ${c.lab.method}.`,
      "",
    );
  }
  for (const m of r.models) {
    const b = m.baseline;
    const bar = m.bar;
    out.push(
      `## ${m.model} (${m.source}; ${m.quantization}; ${
        gib(m.cost.linearBytes)
      } of weights read per token at depth 0)`,
      "",
      `hidden ${m.dims.hidden}, ${m.dims.layers} layers, ${m.dims.nq}/${m.dims.nkv} heads × ${m.dims.hd}, ` +
        `MLP ${m.dims.intermediate}, vocab ${m.dims.vocab}; context window ${m.contextWindow}; batch 1; ` +
        `prefill chunk ${m.e2e.prefillChunk}, ` +
        `${m.e2e.stepsPerSubmit} decode steps per submit.` + (b?.error
          ? ` PyTorch baseline: **not run** (${b.error}).`
          : b
          ? ` PyTorch: ${b.framework}, ${b.cache} cache, ${b.attn}.`
          : ""),
      "",
      "| figure | Flint | roofline | of roofline | PyTorch bf16 | Flint ÷ PyTorch | llama.cpp | target |",
      "|---|--:|--:|--:|--:|--:|--:|--:|",
    );
    const row = (
      label: string,
      ours: number,
      roof?: RooflineRow,
      torch?: number,
      lc?: number,
      target?: number,
    ) => {
      const ratio = torch ? `${(ours / torch).toFixed(2)}×` : "–";
      const t = target ? `${f0(target)} ${ours >= target ? "✓" : "✗"}` : "–";
      out.push(
        `| ${label} | ${f0(ours)} | ${f0(roof?.ceilingTps)} | ${pct(roof?.fraction)} | ${
          f0(torch)
        } | ${ratio} | ${f0(lc)} | ${t} |`,
      );
    };
    out.push(`| load (ms) | ${f0(m.loadMs)} | | | ${b?.load_s ? f0(b.load_s * 1000) : "–"} | | | |`);
    out.push(`| first-run compile (ms) | ${f0(m.compileMs)} | | | | | | |`);
    for (const [i, p] of m.e2e.prefill.entries()) {
      const bt = b?.prefill?.find((x) =>
        x.tokens === p.tokens
      );
      row(
        `prefill ${kTok(p.tokens)} (tok/s)`,
        p.tps.value,
        m.roofline.prefill[i],
        bt?.tps,
        bar?.llamacpp.prefill[p.tokens],
        bar?.target.prefill[p.tokens],
      );
      out.push(`| TTFT ${kTok(p.tokens)} (ms) | ${f0(p.ttftMs.value)} | | | ${f0(bt?.ttft_ms)} | | | |`);
    }
    for (const [i, p] of m.e2e.prefillAtDepth.entries()) {
      row(
        `prefill at ${kTok(p.from)}–${kTok(p.to)} (tok/s)`,
        p.tps.value,
        m.roofline.prefillAtDepth[i],
        undefined,
        atDepth(bar?.llamacpp, p),
        atDepth(bar?.target, p),
      );
    }
    for (const [i, d] of m.e2e.decode.entries()) {
      const bt = b?.decode?.find((x) => x.depth === d.depth);
      row(
        `decode ${d.tokens} at depth ${kTok(d.depth)} (tok/s)`,
        d.tps.value,
        m.roofline.decode[i],
        bt?.tps,
        bar?.llamacpp.decode[d.depth],
        bar?.target.decode[d.depth],
      );
    }
    out.push(
      `| peak GPU memory | ${gib(m.memory.peak)} | | | ${
        b?.peak_memory_bytes ? gib(b.peak_memory_bytes) : "–"
      } | | | |`,
      "",
    );
    if (m.kernels.length) {
      // What the measured kernels alone allow: the rest of a decode step's time is other kernels and the
      // loop.
      const gemv = m.kernels.filter((k) => k.family === "matmul_vec")
        .reduce((a, k) => a + k.us * (k.what.startsWith("lm_head") ? 1 : m.dims.layers), 0);
      for (const d of m.e2e.decode) {
        const att = m.kernels.find((k) => k.family === "attention_decode" && k.what === `depth ${d.depth}`);
        const us = gemv + (att ? att.us * m.dims.layers : 0);
        out.push(
          `Decode at depth ${kTok(d.depth)}: GEMVs ${f1(gemv / 1000)} ms` +
            (att ? ` + attention ${f1((att.us * m.dims.layers) / 1000)} ms` : "") +
            ` per token → at most ${f0(1e6 / us)} tok/s from these kernels alone; measured ${
              f0(d.tps.value)
            } tok/s.  `,
        );
      }
      out.push("");
      out.push(
        "| kernel family | shape | µs / call | GB/s | GFLOP/s | of ceiling |",
        "|---|---|--:|--:|--:|--:|",
      );
      for (const k of m.kernels) {
        out.push(
          `| ${k.family} | ${k.what} | ${f1(k.us)} | ${f0(k.GBs)} | ${f0(k.GFLOPs)} | ${pct(k.ofCeiling)} (${
            k.bound === "bandwidth" ? "read" : k.int8 ? "int8 matmul" : "matmul"
          }) |`,
        );
      }
      out.push("");
    }
  }
  out.push(
    "Roofline: decode = read ceiling ÷ (weight bytes + KV bytes at that depth) per token; " +
      "prefill = matmul ceiling ÷ (2·weights + attention FLOPs) per token. " +
      "The llama.cpp column and targets are the issue's H200 bar for the " +
      "reference shape (qwen3-4b, MLX 4-bit g64); prefill-at-depth is compared with llama.cpp's pp512 " +
      "at depth d on the chunk window that holds position d.",
  );
  return out.join("\n") + "\n";
}

interface Series {
  name: string;
  color: string;
  values: (number | undefined)[];
}

/** Grouped bars, one panel per (model, prefill | decode); targets as dashed ticks. No dependencies. */
export function svgChart(r: BenchResult): string {
  const W = 960;
  const PH = 260;
  const panels: { title: string; cats: string[]; series: Series[]; targets: (number | undefined)[] }[] = [];
  for (const m of r.models) {
    const b = m.baseline;
    const bar = m.bar;
    const pre = [
      ...m.e2e.prefill.map((p) => ({
        l: `${kTok(p.tokens)} prompt`,
        v: p.tps.value,
        t: b?.prefill?.find((x) => x.tokens === p.tokens)?.tps,
        lc: bar?.llamacpp.prefill[p.tokens],
        tg: bar?.target.prefill[p.tokens],
      })),
      ...m.e2e.prefillAtDepth.map((p) => ({
        l: `at ${kTok(p.from)}–${kTok(p.to)}`,
        v: p.tps.value,
        t: undefined,
        lc: atDepth(bar?.llamacpp, p),
        tg: atDepth(bar?.target, p),
      })),
    ];
    const dec = m.e2e.decode.map((d) => ({
      l: `depth ${kTok(d.depth)}`,
      v: d.tps.value,
      t: b?.decode?.find((x) => x.depth === d.depth)?.tps,
      lc: bar?.llamacpp.decode[d.depth],
      tg: bar?.target.decode[d.depth],
    }));
    for (
      const [title, rows] of [[`${m.model}: prefill tok/s`, pre], [
        `${m.model}: decode tok/s (batch 1)`,
        dec,
      ]] as const
    ) {
      panels.push({
        title,
        cats: rows.map((x) => x.l),
        series: [
          { name: "Flint", color: "#e4572e", values: rows.map((x) => x.v) },
          { name: "PyTorch bf16 (HF generate)", color: "#4c72b0", values: rows.map((x) => x.t) },
          { name: "llama.cpp Vulkan (issue bar)", color: "#8c8c8c", values: rows.map((x) => x.lc) },
        ],
        targets: rows.map((x) => x.tg),
      });
    }
  }
  const cols = 2;
  const pw = W / cols;
  const H = 60 + Math.ceil(panels.length / cols) * PH;
  const el: string[] = [];
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  el.push(
    `<text x="12" y="22" font-size="15" font-weight="bold">${
      esc(`Flint benchmark — ${r.machine.adapter}`)
    }</text>`,
  );
  let lx = 12;
  for (
    const [n, c] of [["Flint", "#e4572e"], ["PyTorch bf16 (HF generate)", "#4c72b0"], [
      "llama.cpp Vulkan (issue bar)",
      "#8c8c8c",
    ]]
  ) {
    el.push(
      `<rect x="${lx}" y="31" width="12" height="12" fill="${c}"/><text x="${
        lx + 16
      }" y="41" font-size="11">${esc(n)}</text>`,
    );
    lx += 26 + n.length * 6;
  }
  el.push(
    `<line x1="${lx}" y1="37" x2="${lx + 16}" y2="37" stroke="#222" stroke-dasharray="3,2"/><text x="${
      lx + 20
    }" y="41" font-size="11">target</text>`,
  );
  panels.forEach((p, i) => {
    const ox = (i % cols) * pw + 50;
    const oy = 60 + Math.floor(i / cols) * PH;
    const w = pw - 70;
    const h = PH - 70;
    const all = [...p.series.flatMap((s) => s.values), ...p.targets].filter((v): v is number =>
      v !== undefined && Number.isFinite(v)
    );
    const max = niceMax(Math.max(1, ...all));
    const y = (v: number) => oy + 20 + h - (v / max) * h;
    el.push(`<text x="${ox}" y="${oy + 12}" font-size="12" font-weight="bold">${esc(p.title)}</text>`);
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      el.push(`<line x1="${ox}" y1="${y(v)}" x2="${ox + w}" y2="${y(v)}" stroke="#ddd"/>`);
      el.push(`<text x="${ox - 4}" y="${y(v) + 3}" font-size="9" text-anchor="end">${f0(v)}</text>`);
    }
    const gw = w / Math.max(1, p.cats.length);
    const bw = (gw * 0.8) / p.series.length;
    p.cats.forEach((cat, ci) => {
      const gx = ox + ci * gw + gw * 0.1;
      p.series.forEach((s, si) => {
        const v = s.values[ci];
        if (v === undefined || !Number.isFinite(v)) return;
        const x = gx + si * bw;
        el.push(
          `<rect x="${x.toFixed(1)}" y="${y(v).toFixed(1)}" width="${(bw - 1).toFixed(1)}" height="${
            (oy + 20 + h - y(v)).toFixed(1)
          }" fill="${s.color}"><title>${esc(`${s.name}, ${cat}: ${f0(v)}`)}</title></rect>`,
        );
        el.push(
          `<text x="${(x + bw / 2).toFixed(1)}" y="${
            (y(v) - 3).toFixed(1)
          }" font-size="8" text-anchor="middle">${f0(v)}</text>`,
        );
      });
      const t = p.targets[ci];
      if (t !== undefined) {
        el.push(
          `<line x1="${gx.toFixed(1)}" y1="${y(t).toFixed(1)}" x2="${(gx + gw * 0.8).toFixed(1)}" y2="${
            y(t).toFixed(1)
          }" stroke="#222" stroke-dasharray="3,2"><title>target ${f0(t)}</title></line>`,
        );
      }
      el.push(
        `<text x="${(gx + gw * 0.4).toFixed(1)}" y="${oy + h + 34}" font-size="10" text-anchor="middle">${
          esc(cat)
        }</text>`,
      );
    });
    el.push(`<line x1="${ox}" y1="${oy + 20 + h}" x2="${ox + w}" y2="${oy + 20 + h}" stroke="#444"/>`);
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
    `font-family="sans-serif">\n` +
    `<rect width="100%" height="100%" fill="white"/>\n${el.join("\n")}\n</svg>\n`;
}

function niceMax(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v * 1.05) return m * p;
  return 10 * p;
}
