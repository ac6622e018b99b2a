/** Test fixtures: paths and golden tensors. */
import { DiskModelSource } from "../../src/platform/deno.ts";
import { readHeader, readTensorBytes } from "../../src/loader/safetensors.ts";

export const ROOT = new URL("../../", import.meta.url).pathname;
export const FIXTURES = `${ROOT}test/fixtures`;
export const DEFAULT_MODEL = `${ROOT}models/flint-coder-19m-mlx-4bit`;

/** The tensors of a fixture's golden.safetensors: input_ids, logits, greedy_ids (when present). */
export async function readGolden(
  dir: string,
): Promise<{ inputIds: number[]; logits: Float32Array; greedyIds: number[] | null }> {
  const src = new DiskModelSource(dir);
  const h = await readHeader(src, "golden.safetensors");
  const get = async (n: string) => {
    const t = h.tensors.get(n);
    return t ? (await readTensorBytes(src, t)).slice().buffer : null;
  };
  const ids = await get("input_ids");
  const logits = await get("logits");
  const greedy = await get("greedy_ids");
  src.close();
  return {
    inputIds: [...new Int32Array(ids!)],
    logits: new Float32Array(logits!),
    greedyIds: greedy ? [...new Int32Array(greedy)] : null,
  };
}

/** Largest |got − want| and where: "max diff D at position P, token T" (rows of `vocab` logits). */
export function worstLogit(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  vocab: number,
): { worst: number; where: string } {
  let worst = 0, at = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (d > worst) [worst, at] = [d, i];
  }
  return { worst, where: `max diff ${worst} at position ${Math.floor(at / vocab)}, token ${at % vocab}` };
}

/** Prompt positions whose top token is the same in both (rows of `V` logits). */
export function topAgreement(a: Float32Array, b: Float32Array, V: number): number {
  let n = 0;
  for (let p = 0; p < a.length / V; p++) {
    let ia = 0, ib = 0;
    for (let v = 1; v < V; v++) {
      if (a[p * V + v] > a[p * V + ia]) ia = v;
      if (b[p * V + v] > b[p * V + ib]) ib = v;
    }
    if (ia === ib) n++;
  }
  return n;
}
