/**
 * A small regular-expression AST over bytes, the grammar's intermediate form: a JSON schema becomes these
 * nodes (json.ts, schema.ts), the nodes become a byte automaton (compile.ts). Nodes are immutable and may be
 * shared, making a DAG: the NFA builder reuses a shared node's states wherever it continues the same way,
 * which keeps constructs such as "any subset of the properties, in order" linear in size.
 * @module
 */

/** An inclusive byte range. */
export type ByteRange = readonly [lo: number, hi: number];

export type Node =
  /** These bytes, in order. */
  | { readonly kind: "bytes"; readonly bytes: Uint8Array }
  /** One byte from a set, given as sorted, disjoint, non-adjacent ranges. */
  | { readonly kind: "class"; readonly ranges: readonly ByteRange[] }
  | { readonly kind: "seq"; readonly items: readonly Node[] }
  /** Any one of the items; with none, nothing matches. */
  | { readonly kind: "alt"; readonly items: readonly Node[] }
  /** min to max (Infinity: unbounded) copies of item, with sep between consecutive copies. */
  | {
    readonly kind: "repeat";
    readonly item: Node;
    readonly min: number;
    readonly max: number;
    readonly sep: Node | null;
  };

/** Matches only the empty string. */
export const EMPTY: Node = Object.freeze({ kind: "seq", items: [] });
/** Matches nothing at all. */
export const NOTHING: Node = Object.freeze({ kind: "alt", items: [] });

const utf8 = new TextEncoder();

/** The bytes of a text (UTF-8), or the bytes given. */
export function bytesNode(bytes: Uint8Array | readonly number[]): Node {
  if (bytes.length === 0) return EMPTY;
  return { kind: "bytes", bytes: Uint8Array.from(bytes) };
}

/** A text, matched exactly as its UTF-8 bytes. */
export function literalNode(text: string): Node {
  return bytesNode(utf8.encode(text));
}

/** One byte in any of the ranges (a single number is a range of one). */
export function classNode(...ranges: (number | ByteRange)[]): Node {
  const rs = ranges.map((r) => typeof r === "number" ? [r, r] as const : r)
    .filter(([lo, hi]) => lo <= hi)
    .sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [lo, hi] of rs) {
    if (lo < 0 || hi > 255) throw new RangeError(`byte range ${lo}-${hi} is outside 0-255`);
    const last = merged[merged.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else merged.push([lo, hi]);
  }
  if (merged.length === 0) return NOTHING;
  return { kind: "class", ranges: merged };
}

/** The items one after another. Nested sequences are kept, not flattened: flattening would lose sharing. */
export function seqNode(...items: Node[]): Node {
  if (items.includes(NOTHING)) return NOTHING;
  const kept = items.filter((n) => n !== EMPTY);
  if (kept.length === 0) return EMPTY;
  return kept.length === 1 ? kept[0] : { kind: "seq", items: kept };
}

/** Any one of the items. */
export function altNode(...items: Node[]): Node {
  const kept = [...new Set(items.filter((n) => n !== NOTHING))];
  if (kept.length === 0) return NOTHING;
  return kept.length === 1 ? kept[0] : { kind: "alt", items: kept };
}

/** min to max copies of item (max Infinity: unbounded), sep between consecutive copies. */
export function repeatNode(item: Node, min: number, max: number, sep: Node | null = null): Node {
  if (
    !(min >= 0) || !Number.isInteger(min) || !(max >= min) || (max !== Infinity && !Number.isInteger(max))
  ) {
    throw new RangeError(`bad repetition bounds {${min},${max}}`);
  }
  if (max === 0 || item === EMPTY) return EMPTY;
  if (item === NOTHING) return min === 0 ? EMPTY : NOTHING;
  if (min === 1 && max === 1) return item;
  return { kind: "repeat", item, min, max, sep };
}

/** item or nothing. */
export const optNode = (item: Node): Node => repeatNode(item, 0, 1);
/** Zero or more copies of item. */
export const starNode = (item: Node, sep: Node | null = null): Node => repeatNode(item, 0, Infinity, sep);
/** One or more copies of item. */
export const plusNode = (item: Node, sep: Node | null = null): Node => repeatNode(item, 1, Infinity, sep);
