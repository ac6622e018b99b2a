/**
 * Schema plumbing for schema.ts: resolving local `$ref` pointers, merging the simple sub-schemas of an
 * `allOf` (or a schema with the branch of its `anyOf`), and reading keywords defensively, since schemas
 * come straight from requests.
 * @module
 */

export type Schema = Record<string, unknown>;

export const isObject = (v: unknown): v is Schema => v !== null && typeof v === "object" && !Array.isArray(v);

/** Keywords that only describe: they never change what the grammar accepts. */
const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$comment",
  "$schema",
  "$id",
  "$defs",
  "definitions",
  "deprecated",
  "readOnly",
  "writeOnly",
]);

/** Whether the schema has any keyword besides annotations. */
export function hasConstraints(s: Schema): boolean {
  return Object.keys(s).some((k) => !ANNOTATIONS.has(k));
}

/** A copy of `s` without the given keys. */
export function without(s: Schema, ...keys: string[]): Schema {
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) if (!keys.includes(k)) out[k] = v;
  return out;
}

/** The target of a local JSON pointer (`#`, `#/$defs/x`, `#/definitions/x`, any `#/a/b`), or undefined. */
export function resolveRef(root: unknown, ref: string): unknown {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) return undefined;
  let at: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    } catch {
      return undefined;
    }
    if (isObject(at) && Object.hasOwn(at, key)) at = at[key];
    else if (Array.isArray(at) && /^\d+$/.test(key) && Number(key) < at.length) at = at[Number(key)];
    else return undefined;
  }
  return at;
}

/** The JSON types a schema's `type` allows, or null when it has none (a bad value counts as none). */
export function typesOf(s: Schema): string[] | null {
  const t = s.type;
  if (typeof t === "string") return [t];
  if (Array.isArray(t) && t.every((x) => typeof x === "string")) return [...new Set(t as string[])];
  return null;
}

/** A small non-negative integer keyword, or null when absent or not one. */
export function count(s: Schema, key: string): number | null {
  const v = s[key];
  return typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : null;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Both schemas at once, for simple schemas: types intersect, properties merge, required lists join,
 * bounds tighten. null when they conflict in a way this cannot express (two different `$ref`s,
 * `anyOf`s or `const`s): the caller then keeps one of them.
 */
export function mergeSchemas(a: unknown, b: unknown): unknown | null {
  if (a === true || a === undefined) return b;
  if (b === true || b === undefined) return a;
  if (a === false || b === false) return false;
  if (!isObject(a) || !isObject(b)) return null;
  const out: Schema = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (!(k in out) || same(out[k], v) || ANNOTATIONS.has(k)) {
      if (!(k in out)) out[k] = v;
      continue;
    }
    const u = out[k];
    switch (k) {
      case "type": {
        const ta = typesOf(a), tb = typesOf(b);
        if (!ta || !tb) return null;
        const both = new Set(ta.filter((t) => tb.includes(t)));
        // An integer is a number: integer on one side and number on the other leaves integer.
        if (ta.includes("integer") && tb.includes("number")) both.add("integer");
        if (tb.includes("integer") && ta.includes("number")) both.add("integer");
        if (both.size === 0) return false;
        out.type = [...both];
        break;
      }
      case "properties": {
        if (!isObject(u) || !isObject(v)) return null;
        const props: Schema = { ...u };
        for (const [name, s] of Object.entries(v)) {
          if (!(name in props)) props[name] = s;
          else props[name] = mergeSchemas(props[name], s) ?? props[name];
        }
        out.properties = props;
        break;
      }
      case "required":
        if (!Array.isArray(u) || !Array.isArray(v)) return null;
        out.required = [...new Set([...u, ...v])];
        break;
      case "additionalProperties":
      case "items": {
        const m = mergeSchemas(u, v);
        if (m === null) return null;
        out[k] = m;
        break;
      }
      case "enum": {
        if (!Array.isArray(u) || !Array.isArray(v)) return null;
        out.enum = u.filter((x) => v.some((y) => same(x, y)));
        break;
      }
      case "minLength":
      case "minItems":
        out[k] = Math.max(Number(u), Number(v));
        break;
      case "maxLength":
      case "maxItems":
        out[k] = Math.min(Number(u), Number(v));
        break;
      case "$ref":
      case "anyOf":
      case "oneOf":
      case "allOf":
      case "const":
      case "prefixItems":
        return null;
      default:
        // Keywords the grammar ignores anyway: keep the first.
        break;
    }
  }
  return out;
}
