/** Random paged KV pools and shuffled page tables shared by the rope and attention cases. @module */
import { ShapeError } from "../../errors.ts";
import type { PagedKv } from "../ref/paged.ts";
import { type ActDtype, roundAct } from "../ref/half.ts";
import type { Rng } from "../rng.ts";

export interface Pool extends PagedKv {
  numPages: number;
  /** (numPages, 2, nkv, ps, hd) act values, never zero. */
  kv: Float64Array;
}

/**
 * A pool with `slots` page-table rows covering `lens[s]` positions each. Pages are handed out in a random
 * order, so a sequence's pages are neither contiguous nor increasing, and a few pages stay unused.
 * Unused table entries point at random pages (a kernel that reads past a length reads wrong data).
 */
export function randomPool(
  rng: Rng,
  opts: { lens: number[]; nkv: number; hd: number; ps: number; act: ActDtype; amp?: number },
): Pool {
  const { lens, nkv, hd, ps } = opts;
  if (ps < 1 || !Number.isInteger(ps)) throw new ShapeError(`page size ${ps}`);
  const maxPages = Math.max(1, ...lens.map((l) => Math.ceil(l / ps)));
  const need = lens.reduce((a, l) => a + Math.ceil(l / ps), 0);
  const numPages = need + 3;
  const order = rng.permutation(numPages);
  const pages = new Uint32Array(lens.length * maxPages);
  let next = 0;
  lens.forEach((l, s) => {
    for (let p = 0; p < maxPages; p++) {
      pages[s * maxPages + p] = p < Math.ceil(l / ps) ? order[next++] : rng.int(0, numPages);
    }
  });
  const amp = opts.amp ?? 1;
  const kv = Float64Array.from(
    { length: numPages * 2 * nkv * ps * hd },
    () => roundAct(rng.signed(amp), opts.act),
  );
  return { pages, maxPages, nkv, ps, hd, numPages, kv };
}
