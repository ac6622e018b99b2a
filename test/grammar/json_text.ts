/**
 * JSON text for the grammar tests: serializers for the whitespace policy and against it, random mutations
 * of instances, and byte sequences that are never valid inside a string or after a value.
 */
import { isObject } from "../../src/grammar/schema_merge.ts";
import type { Rng } from "./dfa_util.ts";

export type Style = "compact" | "spaced" | "mixed";

/** JSON text of `v` with the whitespace policy's separators: none, all single spaces, or random. */
export function serialize(v: unknown, style: Style, rng?: Rng): string {
  const sp = () => style === "spaced" || (style === "mixed" && rng!.chance(0.5)) ? " " : "";
  const go = (x: unknown): string => {
    if (Array.isArray(x)) return `[${x.map(go).map((t, i) => i ? `,${sp()}${t}` : t).join("")}]`;
    if (isObject(x)) {
      return `{${
        Object.entries(x).map(([k, y], i) => `${i ? `,${sp()}` : ""}${JSON.stringify(k)}:${sp()}${go(y)}`)
          .join("")
      }}`;
    }
    return JSON.stringify(x);
  };
  return go(v);
}

/** Values of every type, to put where another type belongs. */
const WRONG = [42, -1.5, "str", "", true, null, [], [1], {}, { k: 1 }];

/** Random changes to `v` that may or may not keep it valid: the caller asks the validator. */
export function mutants(v: unknown, rng: Rng, count: number): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < count; i++) out.push(mutate(structuredClone(v), rng));
  return out;
}

function mutate(v: unknown, rng: Rng): unknown {
  // Pick a random node, then change it or its parent's entry.
  const nodes: { parent: unknown; key: string | number | null; value: unknown }[] = [];
  const visit = (x: unknown, parent: unknown, key: string | number | null) => {
    nodes.push({ parent, key, value: x });
    if (Array.isArray(x)) x.forEach((y, i) => visit(y, x, i));
    else if (isObject(x)) { for (const [k, y] of Object.entries(x)) visit(y, x, k); }
  };
  visit(v, null, null);
  const n = rng.pick(nodes);
  const set = (y: unknown) => {
    if (n.parent === null) v = y;
    else (n.parent as Record<string | number, unknown>)[n.key!] = y;
  };
  switch (rng.int(5)) {
    case 0:
      set(rng.pick(WRONG));
      break;
    case 1:
      // Same type, other value: an enum or const miss.
      set(
        typeof n.value === "string"
          ? n.value + "\u2042"
          : typeof n.value === "number"
          ? n.value + 7
          : !n.value,
      );
      break;
    case 2:
      if (isObject(n.value)) n.value["zz_extra"] = 1;
      else set(rng.pick(WRONG));
      break;
    default: {
      // Drop a key or an item.
      const objs = nodes.filter((m) => isObject(m.value) && Object.keys(m.value).length > 0);
      const arrs = nodes.filter((m) => Array.isArray(m.value) && m.value.length > 0);
      if (objs.length && (rng.chance(0.7) || !arrs.length)) {
        const o = rng.pick(objs).value as Record<string, unknown>;
        delete o[rng.pick(Object.keys(o))];
      } else if (arrs.length) (rng.pick(arrs).value as unknown[]).pop();
      else set(rng.pick(WRONG));
    }
  }
  return v;
}

/** JSON text with the given separators, to break the whitespace policy. */
export function serializeWith(v: unknown, comma: string, colon: string): string {
  const go = (x: unknown): string => {
    if (Array.isArray(x)) return `[${x.map(go).join(comma)}]`;
    if (isObject(x)) {
      return `{${Object.entries(x).map(([k, y]) => `${JSON.stringify(k)}${colon}${go(y)}`).join(comma)}}`;
    }
    return JSON.stringify(x);
  };
  return go(v);
}

const utf8 = new TextEncoder();

/** Byte offsets inside the string literals of JSON text where a new character could start. */
export function stringSlots(bytes: Uint8Array): number[] {
  const out: number[] = [];
  let inString = false, afterBackslash = false, hex = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (!inString) {
      if (b === 0x22) (inString = true, out.push(i + 1));
    } else if (hex > 0) {
      if (--hex === 0) out.push(i + 1);
    } else if (afterBackslash) {
      afterBackslash = false;
      if (b === 0x75) hex = 4;
      else out.push(i + 1);
    } else if (b === 0x5c) afterBackslash = true;
    else if (b === 0x22) inString = false;
    else if (i + 1 < bytes.length && (bytes[i + 1] & 0xc0) !== 0x80) out.push(i + 1);
  }
  return out;
}

/** Inside a string these are never valid: bad escapes, raw control bytes, broken or forbidden UTF-8. */
export const BAD_IN_STRING: { what: string; bytes: number[] }[] = [
  ...["\\x", "\\u12G4", "\\U0041", "\\'", "\\ ", "\\u00 "].map((t) => ({
    what: `escape ${t}`,
    bytes: [...utf8.encode(t)],
  })),
  { what: "raw newline", bytes: [0x0a] },
  { what: "raw 0x01", bytes: [0x01] },
  { what: "raw 0x1f", bytes: [0x1f] },
  { what: "0xff", bytes: [0xff] },
  { what: "lone continuation", bytes: [0x80] },
  { what: "overlong C0 80", bytes: [0xc0, 0x80] },
  { what: "overlong C1 BF", bytes: [0xc1, 0xbf] },
  { what: "overlong E0 80 80", bytes: [0xe0, 0x80, 0x80] },
  { what: "overlong F0 80 80 80", bytes: [0xf0, 0x80, 0x80, 0x80] },
  { what: "surrogate ED A0 80", bytes: [0xed, 0xa0, 0x80] },
  { what: "past U+10FFFF", bytes: [0xf4, 0x90, 0x80, 0x80] },
  { what: "F5 lead", bytes: [0xf5, 0x80, 0x80, 0x80] },
  { what: "truncated E2 82", bytes: [0xe2, 0x82] },
  { what: "truncated F0 9F 98", bytes: [0xf0, 0x9f, 0x98] },
];

/** After a complete value these are never valid. */
export const TRAILING = ["x", " ", "\n", "}", "]", ",", '"', "\t"];
