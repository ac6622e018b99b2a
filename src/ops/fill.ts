/**
 * Host wrapper of `fill_random.wgsl`: counter-hash random words for synthetic weights (loader/synthetic.ts).
 * @module
 */
import { grid1d } from "../gpu/kernel.ts";
import { check, type OpContext, record } from "./context.ts";

/** What the words hold (see the kernel header). */
export type FillKind =
  | { kind: "raw" }
  | { kind: "uniformBf16"; lo: number; hi: number }
  | { kind: "biasBf16"; scaleSeed: number; lo: number; hi: number; mid: number }
  | { kind: "uniformF32"; lo: number; hi: number };

export interface FillArgs {
  /** Destination, at least `words` u32. */
  out: GPUBuffer;
  words: number;
  /** Index of out[0] within the whole tensor, in words (row shards continue one stream). */
  word0?: number;
  seed: number;
  fill: FillKind;
}

const DEFINE = { raw: "RAW", uniformBf16: "UNIFORM", biasBf16: "BIAS", uniformF32: "VEC_F32" } as const;

/** Records one fill dispatch. */
export async function fillRandom(ctx: OpContext, a: FillArgs): Promise<void> {
  const word0 = a.word0 ?? 0;
  check(
    a.words > 0 && a.out.size >= a.words * 4,
    "fillRandom",
    `${a.words} words into a ${a.out.size}-byte buffer`,
  );
  check(word0 + a.words <= 2 ** 31, "fillRandom", `element index ${word0 + a.words} words overflows u32`);
  const f = a.fill;
  const WG = 256;
  const ITEMS = 4;
  await record(
    ctx,
    { file: "fill_random.wgsl", defines: { [DEFINE[f.kind]]: 1 }, overrides: { WG, ITEMS } },
    {
      buffers: { out: a.out },
      params: {
        words: a.words,
        word0,
        seed: a.seed >>> 0,
        seed2: f.kind === "biasBf16" ? f.scaleSeed >>> 0 : 0,
        lo: "lo" in f ? f.lo : 0,
        hi: "hi" in f ? f.hi : 0,
        mid: f.kind === "biasBf16" ? f.mid : 0,
      },
      grid: grid1d(Math.ceil(a.words / (WG * ITEMS))),
    },
  );
}
