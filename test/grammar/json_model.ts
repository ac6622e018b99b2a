/**
 * A model of the supported JSON-Schema subset for tests: a validator (JSON Schema semantics, with the
 * grammar's documented relaxations: large length/item bounds ignored, oneOf read as anyOf), and a
 * generator of valid instances that stays inside the grammar's depth and recursion limits.
 */
import { MAX_ITEMS_BOUND, MAX_REF_DEPTH, MAX_STRING_BOUND } from "../../src/grammar/schema.ts";
import {
  hasConstraints,
  isObject,
  mergeSchemas,
  resolveRef,
  type Schema,
  typesOf,
  without,
} from "../../src/grammar/schema_merge.ts";
import type { Rng } from "./dfa_util.ts";

const same = (a: unknown, b: unknown): boolean => {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
  }
  return Object.is(a, b) || (a === 0 && b === 0);
};

const bound = (s: Schema, key: string, limit: number): number | null => {
  const v = s[key];
  return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= limit ? v : null;
};

function hasType(v: unknown, t: string): boolean {
  switch (t) {
    case "string":
      return typeof v === "string";
    case "number":
      return typeof v === "number";
    case "integer":
      return Number.isInteger(v);
    case "boolean":
      return typeof v === "boolean";
    case "null":
      return v === null;
    case "object":
      return isObject(v);
    case "array":
      return Array.isArray(v);
  }
  return true;
}

/** Whether `v` satisfies `schema` (refs resolve against `root`). */
export function validate(schema: unknown, v: unknown, root: unknown = schema): boolean {
  if (schema === false) return false;
  if (!isObject(schema)) return true;
  const s = schema;
  if (typeof s.$ref === "string") {
    const target = resolveRef(root, s.$ref);
    if (target !== undefined && !validate(target, v, root)) return false;
  }
  if (Array.isArray(s.allOf) && !s.allOf.every((x) => validate(x, v, root))) return false;
  if (Array.isArray(s.anyOf) && !s.anyOf.some((x) => validate(x, v, root))) return false;
  if (Array.isArray(s.oneOf) && !s.oneOf.some((x) => validate(x, v, root))) return false;
  if ("const" in s && !same(s.const, v)) return false;
  if (Array.isArray(s.enum) && !s.enum.some((x) => same(x, v))) return false;
  const types = typesOf(s);
  if (types) {
    if (s.nullable === true) types.push("null");
    if (!types.some((t) => hasType(v, t))) return false;
  }
  if (typeof v === "string") {
    const n = [...v].length;
    const min = bound(s, "minLength", MAX_STRING_BOUND), max = bound(s, "maxLength", MAX_STRING_BOUND);
    if ((min !== null && n < min) || (max !== null && n > max)) return false;
  }
  if (isObject(v)) {
    const props = isObject(s.properties) ? s.properties : {};
    if (Array.isArray(s.required) && !s.required.every((k) => typeof k !== "string" || Object.hasOwn(v, k))) {
      return false;
    }
    for (const [k, x] of Object.entries(v)) {
      if (Object.hasOwn(props, k)) {
        if (!validate(props[k], x, root)) return false;
      } else if (s.additionalProperties !== undefined && !validate(s.additionalProperties, x, root)) {
        return false;
      }
    }
  }
  if (Array.isArray(v)) {
    const tuple = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    const rest = Array.isArray(s.prefixItems)
      ? s.items
      : Array.isArray(s.items)
      ? s.additionalItems
      : s.items;
    for (let i = 0; i < v.length; i++) {
      const sub = i < tuple.length ? tuple[i] : rest;
      if (sub !== undefined && !validate(sub, v[i], root)) return false;
    }
    const min = bound(s, "minItems", MAX_ITEMS_BOUND), max = bound(s, "maxItems", MAX_ITEMS_BOUND);
    if ((min !== null && v.length < min) || (max !== null && v.length > max)) return false;
  }
  return true;
}

const CUT = Symbol("cut");
type Gen = unknown | typeof CUT;

/** Characters free strings are made of: plain, escaped by JSON.stringify, and 2-, 3- and 4-byte UTF-8. */
const CHARS = [
  ..."abcXYZ09 _-./:",
  '"',
  "\\",
  "\n",
  "\t",
  "\u0001",
  "\u001f",
  "\u007f",
  "é",
  "ß",
  "中",
  "€",
  "\ud7ff",
  "\ue000",
  "\uffff",
  "😀",
  "\u{10ffff}",
  "\u{10000}",
];
const KEYS = ["a", "b", "key", "x y", "ключ", 'k"q', "😀", "", "0", "nested"];

export interface GenOptions {
  maxDepth?: number;
}

/** A random instance of `schema` that the grammar accepts; null-free where the schema allows. */
export function instance(schema: unknown, rng: Rng, opts: GenOptions = {}): unknown {
  const g = new Generator(schema, rng, opts.maxDepth ?? 4);
  const v = g.value(schema, 0);
  return v === CUT ? g.any(0) : v;
}

class Generator {
  refs = new Map<string, number>();
  constructor(readonly root: unknown, readonly rng: Rng, readonly maxDepth: number) {}

  any(level: number): unknown {
    const r = this.rng;
    const room = this.maxDepth - level >= 1;
    switch (r.int(room ? 8 : 5)) {
      case 0:
        return this.string(0, 6);
      case 1:
        return r.pick([0, -3, 17, 2.5, -0.125, 1e21, 6.02e-23]);
      case 2:
        return r.chance(0.5);
      case 3:
        return null;
      case 4:
        return r.pick(["", "x", "é"]);
      case 5:
      case 6: {
        const o: Record<string, unknown> = {};
        for (let i = r.int(3); i > 0; i--) o[r.pick(KEYS)] = this.any(level + 1);
        return o;
      }
      default:
        return Array.from({ length: r.int(3) }, () => this.any(level + 1));
    }
  }

  string(min: number, max: number): string {
    const n = this.rng.range(min, Math.max(min, Math.min(max, min + 8)));
    return Array.from({ length: n }, () => this.rng.pick(CHARS)).join("");
  }

  value(s: unknown, level: number): Gen {
    const r = this.rng;
    if (s === false) return CUT;
    if (!isObject(s)) return this.any(level);
    if (typeof s.$ref === "string") {
      const target = resolveRef(this.root, s.$ref);
      const sib = without(s, "$ref");
      if (target === undefined) return this.value(sib, level);
      const depth = this.refs.get(s.$ref) ?? 0;
      if (depth >= MAX_REF_DEPTH) return CUT;
      this.refs.set(s.$ref, depth + 1);
      try {
        return this.value(hasConstraints(sib) ? mergeSchemas(target, sib) ?? target : target, level);
      } finally {
        this.refs.set(s.$ref, depth);
      }
    }
    if (Array.isArray(s.allOf) && s.allOf.length) {
      let m: unknown = without(s, "allOf");
      for (const p of s.allOf) if (m !== null) m = mergeSchemas(m, p);
      return this.value(m ?? s.allOf[0], level);
    }
    const key = Array.isArray(s.anyOf) ? "anyOf" : Array.isArray(s.oneOf) ? "oneOf" : null;
    if (key) {
      const rest = without(s, key);
      for (const b of r.shuffle(s[key] as unknown[])) {
        const v = this.value(hasConstraints(rest) ? mergeSchemas(rest, b) ?? b : b, level);
        if (v !== CUT) return v;
      }
      return CUT;
    }
    const types = typesOf(s);
    if (types && s.nullable === true) types.push("null");
    const values = "const" in s ? [s.const] : Array.isArray(s.enum) ? s.enum : null;
    if (values) {
      const ok = values.filter((v) =>
        !types || types.some((t) => hasType(v, t) && (t !== "number" || isFinite(v as number)))
      );
      return ok.length ? r.pick(ok) : CUT;
    }
    const kinds = types ??
      (("properties" in s || "required" in s || "additionalProperties" in s)
        ? ["object"]
        : ("items" in s || "prefixItems" in s)
        ? ["array"]
        : null);
    if (!kinds) return this.any(level);
    for (const t of r.shuffle(kinds)) {
      const v = this.typed(t, s, level);
      if (v !== CUT) return v;
    }
    return CUT;
  }

  typed(t: string, s: Schema, level: number): Gen {
    const r = this.rng;
    switch (t) {
      case "string": {
        const min = bound(s, "minLength", MAX_STRING_BOUND) ?? 0;
        const max = bound(s, "maxLength", MAX_STRING_BOUND) ?? Infinity;
        return max < min ? CUT : this.string(min, max);
      }
      case "number":
        return r.pick([0, -1, 3.5, -0.001, 1e-7, 123456.75, 2e300]);
      case "integer":
        return r.pick([0, 1, -1, 42, -90210, 1234567890123]);
      case "boolean":
        return r.chance(0.5);
      case "null":
        return null;
      case "object":
        return this.object(s, level);
      case "array":
        return this.array(s, level);
    }
    return this.any(level);
  }

  object(s: Schema, level: number): Gen {
    const r = this.rng;
    const props = isObject(s.properties) ? Object.entries(s.properties) : [];
    const required = new Set(Array.isArray(s.required) ? s.required : []);
    const extra = isObject(s.additionalProperties) || typeof s.additionalProperties === "boolean"
      ? s.additionalProperties
      : true;
    for (const k of required) {
      if (typeof k === "string" && !props.some(([p]) => p === k)) {
        props.push([k, extra === false ? true : extra]);
      }
    }
    const o: Record<string, unknown> = {};
    if (props.length === 0) {
      if (extra === false) return o;
      for (let i = r.int(4); i > 0; i--) {
        const v = this.value(extra, level + 1);
        if (v === CUT) return {};
        o[this.string(0, 5)] = v;
      }
      return o;
    }
    for (const [k, sub] of props) {
      const req = required.has(k);
      if (!req && (sub === false || r.chance(0.4))) continue;
      const v = this.value(sub, level + 1);
      if (v === CUT) {
        if (req) return CUT;
        continue;
      }
      o[k] = v;
    }
    return o;
  }

  array(s: Schema, level: number): Gen {
    const tuple = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    const tail = Array.isArray(s.prefixItems)
      ? s.items
      : Array.isArray(s.items)
      ? s.additionalItems
      : s.items;
    const min = bound(s, "minItems", MAX_ITEMS_BOUND) ?? 0;
    const max = bound(s, "maxItems", MAX_ITEMS_BOUND) ?? Infinity;
    if (max < min) return CUT;
    const n = this.rng.range(min, Math.min(max, min + 4));
    const out: unknown[] = [];
    for (let i = 0; i < n; i++) {
      const sub = i < tuple.length ? tuple[i] : tail ?? true;
      const v = this.value(sub, level + 1);
      if (v === CUT) return i < min ? CUT : out;
      out.push(v);
    }
    return out;
  }
}
