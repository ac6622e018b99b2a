/**
 * What constrained decoding costs: batch-1 decode tok/s on one engine with no grammar and under three
 * grammars, runs interleaved; and the GPU time of the grammar mask and advance dispatches beside the
 * sampler's, taken from the engine's own decode plan (bench/timer.ts). The grammars:
 *   string: JSON-string-like content in one looping state (every printable token walks all its bytes on
 *           one table row), then control byte 0x01 to accept, which models hardly write unless forced to;
 *   chain:  the same bytes, but each byte moves to a new state (4095 of them): a token's walk reads a new
 *           table row per byte, the mask's worst case (a long string length bound compiles to this);
 *   digits: at least 4095 digits (most tokens' walks stop at their first byte).
 *   deno run -A bench/grammar_cost.ts [--synthetic qwen3-4b[,NAME]] [--model default|DIR[,DIR]]
 *     [--tokens 128] [--runs 3] [--warmup 1] [--prompt 16] [--target-ms 100] [--out FILE.json]
 * So EOS is allowed only at a run's last token and runs make their full token count (a shorter run is
 * logged; the unconstrained runs have EOS switched off, as in bench.ts). Prints a Markdown table.
 * @module
 */
import { parseFlags, runCli } from "../src/cli/args.ts";
import type { Engine } from "../src/engine/engine.ts";
import { Scheduler } from "../src/engine/scheduler.ts";
import { GREEDY } from "../src/engine/slots.ts";
import { ValidationError } from "../src/errors.ts";
import { type ByteDfa, DEAD } from "../src/grammar/dfa.ts";
import { makeDfa } from "../src/lab/ref/grammar.ts";
import { loadModel, type ModelSpec, modelSpecs, randomIds } from "./measure.ts";
import { GpuTimer, median } from "./timer.ts";

const SPEC = {
  synthetic: "string",
  model: "string",
  tokens: "number",
  runs: "number",
  warmup: "number",
  prompt: "number",
  "target-ms": "number",
  out: "string",
  help: "boolean",
} as const;

const log = (s: string) => console.error(s);
const VARIANTS = ["none", "string", "chain", "digits"] as const;
type Variant = (typeof VARIANTS)[number];

/** At least `n` bytes, each one of `bytes`: states 0..n, the last accepting and looping. */
function atLeast(bytes: number[], n: number): ByteDfa {
  const next = new Uint16Array((n + 1) * 256).fill(DEAD);
  for (let s = 0; s <= n; s++) for (const b of bytes) next[s * 256 + b] = Math.min(s + 1, n);
  const accept = new Uint8Array(n + 1);
  accept[n] = 1;
  return makeDfa(n + 1, next, accept);
}

/** Any number of `bytes` in state 0, then byte 0x01 into the accepting state 1. */
function loop(bytes: number[]): ByteDfa {
  const next = new Uint16Array(2 * 256).fill(DEAD);
  for (const b of bytes) next[b] = 0;
  next[0x01] = 1;
  return makeDfa(2, next, Uint8Array.of(0, 1));
}

/** JSON-string-like content: printable ASCII but `"` and `\`, and every byte ≥ 0x80. */
function stringBytes(): number[] {
  const out: number[] = [];
  for (let b = 0x20; b < 0x100; b++) if (b !== 0x22 && b !== 0x5c && b !== 0x7f) out.push(b);
  return out;
}

/** EOS ids on the CPU list and the GPU's (bench.ts switches them off; a grammar needs one to exist). */
function setEos(engine: Engine, ids: number[]): void {
  engine.eosIds.splice(0, engine.eosIds.length, ...ids);
  engine.gpu.device.queue.writeBuffer(engine.slots.eos, 0, new Uint32Array([ids.length, ...ids]));
}

interface ModelCost {
  model: string;
  adapter: string;
  vocab: number;
  tokens: number;
  /** Decode tok/s per variant: median and runs. */
  decode: Record<Variant, { median: number; runs: number[] }>;
  /** GPU µs per dispatch of the decode plan's tail. */
  kernelUs: { sample: number; maskString: number; maskChain: number; maskDigits: number; advance: number };
  timing: string;
}

/** GPU time of the mask (each grammar), advance and sample dispatches of a one-row grammar decode step. */
async function kernelTimes(
  engine: Engine,
  dfas: Record<Exclude<Variant, "none">, ByteDfa>,
  targetMs: number,
) {
  const plan = await engine.plan({ decode: 1, segments: [], logits: "sampled", grammar: true });
  const find = (name: string) => {
    const d = plan.list.find((x) => x.kernel.label.startsWith(name));
    if (!d) throw new Error(`no ${name} dispatch in the grammar decode plan`);
    return d;
  };
  const slot = engine.slots.acquire()!;
  const timer = new GpuTimer(engine.gpu, { targetMs });
  try {
    // A decode row at position 0 of a slot far from its limit: the sampler never marks it done.
    engine.slots.start(slot, [1], engine.contextWindow - 1, GREEDY);
    engine.writeRows(Uint32Array.of(1, 0, slot, 1));
    const us = async (name: string) => (await timer.time([find(name)])).ms * 1000;
    const mask = async (dfa: ByteDfa) => {
      engine.grammar!.start(slot, dfa);
      return await us("grammar_mask");
    };
    const maskString = await mask(dfas.string), maskChain = await mask(dfas.chain);
    const maskDigits = await mask(dfas.digits);
    const sample = await us("sample");
    const advance = await us("grammar_advance");
    return { us: { sample, maskString, maskChain, maskDigits, advance }, method: timer.method };
  } finally {
    engine.grammar!.clear(slot);
    engine.slots.release(slot);
    timer.destroy();
  }
}

async function measure(
  spec: ModelSpec & { label: string },
  o: { tokens: number; runs: number; warmup: number; prompt: number; targetMs: number },
): Promise<ModelCost> {
  const ctx = Math.ceil((o.prompt + o.tokens + 2) / 16) * 16;
  log(`[grammar] ${spec.label}: loading (context window ${ctx})`);
  const { engine } = await loadModel(spec, { contextWindow: ctx, seed: 1 });
  try {
    if (!engine.grammar) throw new ValidationError(`${spec.label}: ${engine.grammarUnavailable}`);
    const cap = engine.grammar.maxStates - 1;
    if (cap < 16 * o.tokens) log(`  note: ${cap}-byte grammars may be completed within ${o.tokens} tokens`);
    const digits = [..."0123456789"].map((c) => c.charCodeAt(0));
    const dfas = {
      string: loop(stringBytes()),
      chain: atLeast(stringBytes(), cap),
      digits: atLeast(digits, cap),
    };
    // An id without bytes (a special token) as EOS: the mask allows it only in accepting states.
    const eos = [...(engine.tokenizer?.specialIds ?? [])][0] ?? 0;
    const V = engine.config.dims.vocab;
    const sched = new Scheduler(engine);
    const runs: Record<Variant, number[]> = { none: [], string: [], chain: [], digits: [] };
    try {
      for (let run = 0; run < o.warmup + o.runs; run++) {
        for (const v of VARIANTS) {
          setEos(engine, v === "none" ? [] : [eos]);
          const grammar = v === "none" ? undefined : dfas[v];
          const prompt = randomIds(o.prompt, V, 1000 * run + VARIANTS.indexOf(v) + 1);
          const r = await sched.submit({ prompt, maxTokens: o.tokens + 1, grammar, sampling: GREEDY }).result;
          if (r.error) throw r.error;
          if (r.completionTokens !== o.tokens + 1) {
            log(`  ${v}: ${r.completionTokens} tokens (${r.finishReason})`);
          }
          const measured = run >= o.warmup;
          log(`  ${measured ? "run" : "warm-up"} ${run + 1}, ${v}: ${r.decodeTps.toFixed(1)} tok/s`);
          if (measured) runs[v].push(r.decodeTps);
        }
      }
    } finally {
      await sched.close();
      setEos(engine, []);
    }
    const k = await kernelTimes(engine, dfas, o.targetMs);
    const decode = Object.fromEntries(VARIANTS.map((v) => [v, { median: median(runs[v]), runs: runs[v] }]));
    return {
      model: spec.label,
      adapter: engine.gpu.info.adapter,
      vocab: V,
      tokens: o.tokens,
      decode: decode as ModelCost["decode"],
      kernelUs: k.us,
      timing: k.method,
    };
  } finally {
    engine.destroy();
  }
}

function markdown(rows: ModelCost[]): string {
  const cell = (r: ModelCost, v: Variant) => {
    const x = r.decode[v].median, base = r.decode.none.median;
    return v === "none" ? x.toFixed(0) : `${x.toFixed(0)} (${(100 * (x / base - 1)).toFixed(1)}%)`;
  };
  const out = [
    "| model | vocab | decode tok/s: no grammar | string | chain | digits " +
    "| mask µs: string / chain / digits | advance µs | sample µs |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const r of rows) {
    const k = r.kernelUs;
    const masks = [k.maskString, k.maskChain, k.maskDigits].map((x) => x.toFixed(1)).join(" / ");
    const tps = VARIANTS.map((v) => cell(r, v)).join(" | ");
    out.push(
      `| ${r.model} | ${r.vocab} | ${tps} | ${masks} | ${k.advance.toFixed(1)} | ${k.sample.toFixed(1)} |`,
    );
  }
  return out.join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    const doc = Deno.readTextFileSync(new URL(import.meta.url)).split("\n");
    console.log(doc.slice(1, doc.findIndex((l) => l.includes("@module"))).join("\n").replace(/^ \* ?/gm, ""));
    return 0;
  }
  const specs = modelSpecs(f.synthetic, f.model);
  const o = {
    tokens: f.tokens ?? 128,
    runs: f.runs ?? 3,
    warmup: f.warmup ?? 1,
    prompt: f.prompt ?? 16,
    targetMs: f["target-ms"] ?? 100,
  };
  const rows: ModelCost[] = [];
  for (const spec of specs) rows.push(await measure(spec, o));
  const table = markdown(rows);
  console.log(table);
  if (f.out) {
    const json = {
      date: new Date().toISOString(),
      command: `deno run -A bench/grammar_cost.ts ${argv.join(" ")}`,
      ...o,
      rows,
      table,
    };
    await Deno.writeTextFile(f.out, JSON.stringify(json, null, 1) + "\n");
    log(`[grammar] wrote ${f.out}`);
  }
  return 0;
}

if (import.meta.main) await runCli(main);
