/**
 * JSON Schema to grammar, for the subset tool parameters and response formats use. Supported: `type` (one or
 * a list), `enum`, `const`, `properties` + `required`, `additionalProperties`, `items`, `prefixItems`,
 * `minItems`/`maxItems` up to 8, `minLength`/`maxLength` up to 64 characters, `anyOf`/`oneOf` (both as
 * alternatives), `allOf` of simple sub-schemas (merged, so `additionalProperties: false` applies to the
 * union of their properties), local `$ref` (inlined, recursion cut at MAX_REF_DEPTH), `nullable`,
 * `true`/`{}` and `false`. Other keywords (`pattern`, `format`, `minimum`, ...) are ignored: the output
 * then has the right shape but may break them.
 * Objects with `properties` write those keys in declared order, any of the optional ones left out, and no
 * other keys (undeclared `required` keys are written last); without either, any keys with values per
 * `additionalProperties`.
 * Whitespace follows json.ts.
 * @module
 */
import { ValidationError } from "../errors.ts";
import { compileNode, type CompileOptions } from "./compile.ts";
import type { ByteDfa } from "./dfa.ts";
import {
  anyKeysObjectNode,
  anyValueNode,
  COMMA,
  JSON_BOOLEAN,
  JSON_INTEGER,
  JSON_NULL,
  JSON_NUMBER,
  jsonLiteralNode,
  memberNode,
  stringNode,
} from "./json.ts";
import { altNode, EMPTY, literalNode, type Node, NOTHING, optNode, repeatNode, seqNode } from "./regex.ts";
import {
  count,
  hasConstraints,
  isObject,
  mergeSchemas,
  resolveRef,
  type Schema,
  typesOf,
  without,
} from "./schema_merge.ts";

export interface JsonGrammarOptions {
  /**
   * Values the schema leaves free (`{}`, `true`, no `type`, objects without `properties`) are any JSON value
   * that keeps the whole value (for a tool call, its arguments) at most this many containers deep (default
   * 4; the schema's own containers count, but are never cut): without a bound the automaton would be
   * infinite, and its size grows about 2^depth. A free value already that deep is a scalar.
   */
  maxDepth?: number;
  /** The request field that errors name. */
  param?: string | null;
}

/** How many times one `$ref` may be expanded inside itself; deeper, its recursive uses are dropped. */
export const MAX_REF_DEPTH = 3;
/** Larger `maxLength` is ignored, and so is larger `minLength`. */
export const MAX_STRING_BOUND = 64;
/** Larger `maxItems` is ignored, and so is larger `minItems`. */
export const MAX_ITEMS_BOUND = 8;
/** Bounds the work on schemas whose references multiply (each `$ref` is inlined where used). */
const MAX_SCHEMA_NODES = 100_000;
/** Sub-schemas nested deeper than this are refused (the compiler recurses on them). */
const MAX_NESTING = 256;

interface Ctx {
  root: unknown;
  maxDepth: number;
  param: string | null;
  /** Per `$ref`: how many expansions of it enclose the current one. */
  refs: Map<string, number>;
  visited: number;
  /** Sub-schemas being compiled now, outermost first: their nesting depth. */
  open: number;
  /** Second pass: a cut in a required place becomes any value instead of cutting its parent. */
  fallback: boolean;
}

/**
 * The grammar of one JSON value matching `schema`.
 *
 * @example
 * const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
 * accepts(compileNode(jsonValueNode(schema)), '{"city": "Paris"}'); // true
 */
export function jsonValueNode(schema: unknown, opts: JsonGrammarOptions = {}): Node {
  const ctx: Ctx = {
    root: schema,
    maxDepth: opts.maxDepth ?? 4,
    param: opts.param ?? null,
    refs: new Map(),
    visited: 0,
    open: 0,
    fallback: false,
  };
  const node = valueOf(schema, 0, ctx);
  if (node !== null) return node;
  // Every way through needs deeper recursion: give up on it where it happens, not for the whole value.
  ctx.fallback = true;
  return valueOf(schema, 0, ctx) ?? anyAt(0, ctx);
}

/** A DFA for output that is exactly one JSON value matching `schema` (response_format json_schema). */
export function compileJsonSchema(schema: unknown, opts: JsonGrammarOptions & CompileOptions = {}): ByteDfa {
  const o = { param: "response_format", ...opts };
  return compileNode(jsonValueNode(schema, o), o);
}

/** A DFA for output that is one JSON object, any keys and values (response_format json_object). */
export function compileJsonObject(opts: JsonGrammarOptions & CompileOptions = {}): ByteDfa {
  return compileJsonSchema({ type: "object" }, opts);
}

const anyAt = (level: number, ctx: Ctx) => anyValueNode(ctx.maxDepth - level);

/**
 * The grammar of a value `level` containers deep. null means "cut": a `$ref` recursed past MAX_REF_DEPTH.
 * A cut alternative is dropped, a cut optional property or array item is left out, and a cut required
 * one cuts its parent in turn. Only when that cuts the whole value does jsonValueNode take a second pass,
 * which makes each cut required value any JSON value instead.
 */
function valueOf(schema: unknown, level: number, ctx: Ctx): Node | null {
  if (++ctx.visited > MAX_SCHEMA_NODES) {
    throw new ValidationError(
      `the schema is too complex to enforce: over ${MAX_SCHEMA_NODES} sub-schemas with references inlined`,
      ctx.param,
    );
  }
  if (ctx.open >= MAX_NESTING) {
    throw new ValidationError(
      `the schema is nested too deeply to enforce: over ${MAX_NESTING} levels`,
      ctx.param,
    );
  }
  ctx.open++;
  try {
    return subschema(schema, level, ctx);
  } finally {
    ctx.open--;
  }
}

function subschema(schema: unknown, level: number, ctx: Ctx): Node | null {
  if (schema === false) return NOTHING;
  // true, {} and anything that is not a schema object: any value.
  if (!isObject(schema)) return anyAt(level, ctx);
  if (typeof schema.$ref === "string") return refOf(schema, level, ctx);
  if (Array.isArray(schema.allOf) && schema.allOf.length > 0) {
    const rest = without(schema, "allOf");
    let merged: unknown = rest;
    for (const part of schema.allOf) if (merged !== null) merged = mergeSchemas(merged, part);
    // Parts that do not merge: keep the first.
    if (merged === null) merged = mergeSchemas(rest, schema.allOf[0]) ?? schema.allOf[0];
    return valueOf(merged, level, ctx);
  }
  const key = Array.isArray(schema.anyOf) ? "anyOf" : Array.isArray(schema.oneOf) ? "oneOf" : null;
  if (key) {
    const rest = without(schema, key);
    const constrained = hasConstraints(rest);
    const branches = schema[key] as unknown[];
    return cutAlt(branches.map((b) => valueOf(constrained ? mergeSchemas(rest, b) ?? b : b, level, ctx)));
  }

  const types = typesOf(schema);
  if (types && schema.nullable === true && !types.includes("null")) types.push("null");
  const values = "const" in schema ? [schema.const] : Array.isArray(schema.enum) ? schema.enum : null;
  if (values) {
    return altNode(...values.filter((v) => !types || types.some((t) => isType(v, t))).map(jsonLiteralNode));
  }

  const kinds = types ?? inferTypes(schema);
  if (!kinds) return anyAt(level, ctx);
  return cutAlt(kinds.map((t) => typeNode(t, schema, level, ctx)));
}

function refOf(schema: Schema, level: number, ctx: Ctx): Node | null {
  const ref = schema.$ref as string;
  const target = resolveRef(ctx.root, ref);
  const siblings = without(schema, "$ref");
  // A reference we cannot follow (another document) is ignored like an unknown keyword.
  if (target === undefined) return valueOf(siblings, level, ctx);
  const depth = ctx.refs.get(ref) ?? 0;
  if (depth >= MAX_REF_DEPTH) return null;
  const merged = hasConstraints(siblings) ? mergeSchemas(target, siblings) ?? target : target;
  ctx.refs.set(ref, depth + 1);
  try {
    return valueOf(merged, level, ctx);
  } finally {
    ctx.refs.set(ref, depth);
  }
}

/** The alternatives that were not cut; null when all were. */
function cutAlt(nodes: (Node | null)[]): Node | null {
  const kept = nodes.filter((n): n is Node => n !== null);
  return kept.length === 0 && nodes.length > 0 ? null : altNode(...kept);
}

/** A missing `type`: object when the schema has object keywords, array for array keywords, else any. */
function inferTypes(s: Schema): string[] | null {
  if ("properties" in s || "required" in s || "additionalProperties" in s) return ["object"];
  if ("items" in s || "prefixItems" in s) return ["array"];
  return null;
}

function isType(v: unknown, t: string): boolean {
  switch (t) {
    case "string":
      return typeof v === "string";
    case "number":
      return typeof v === "number" && Number.isFinite(v);
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
    default:
      return true;
  }
}

function typeNode(t: string, s: Schema, level: number, ctx: Ctx): Node | null {
  switch (t) {
    case "string": {
      const min = count(s, "minLength") ?? 0;
      const max = count(s, "maxLength") ?? Infinity;
      if (max < min) return NOTHING;
      return stringNode(min <= MAX_STRING_BOUND ? min : 0, max <= MAX_STRING_BOUND ? max : Infinity);
    }
    case "number":
      return JSON_NUMBER;
    case "integer":
      return JSON_INTEGER;
    case "boolean":
      return JSON_BOOLEAN;
    case "null":
      return JSON_NULL;
    case "object":
      return objectOf(s, level, ctx);
    case "array":
      return arrayOf(s, level, ctx);
    default:
      // A type name JSON Schema does not have: any value.
      return anyAt(level, ctx);
  }
}

function objectOf(s: Schema, level: number, ctx: Ctx): Node | null {
  const props = isObject(s.properties) ? Object.entries(s.properties) : [];
  const required = new Set(Array.isArray(s.required) ? s.required.filter((k) => typeof k === "string") : []);
  const extra = s.additionalProperties;
  const extraSchema = isObject(extra) || typeof extra === "boolean" ? extra : true;
  // Required keys that are not declared are written last, valued as additionalProperties says.
  const declared = new Set(props.map(([k]) => k));
  for (const k of required) if (!declared.has(k)) props.push([k, extraSchema === false ? true : extraSchema]);
  if (props.length === 0) {
    if (extraSchema === false) return literalNode("{}");
    const value = valueOf(extraSchema, level + 1, ctx);
    return value === null ? literalNode("{}") : anyKeysObjectNode(value);
  }
  const members: { node: Node; required: boolean }[] = [];
  for (const [k, sub] of props) {
    const req = required.has(k);
    const value = valueOf(sub, level + 1, ctx);
    if (!req && (value === null || value === NOTHING)) continue;
    if (value === null && !ctx.fallback) return null;
    members.push({ node: memberNode(k, value ?? anyAt(level + 1, ctx)), required: req });
  }
  return seqNode(literalNode("{"), membersNode(members), literalNode("}"));
}

/**
 * The members in order, each optional one present or not, commas between. Built so that each member's
 * grammar appears once: `rest[i]` (something already written, members i.. to come) is shared by all the
 * ways of reaching it.
 */
function membersNode(ms: { node: Node; required: boolean }[]): Node {
  let rest = EMPTY;
  let first = EMPTY;
  for (let i = ms.length - 1; i >= 0; i--) {
    const here = seqNode(ms[i].node, rest);
    const afterComma = seqNode(COMMA, here);
    rest = ms[i].required ? afterComma : altNode(afterComma, rest);
    first = ms[i].required ? here : altNode(here, first);
  }
  return first;
}

function arrayOf(s: Schema, level: number, ctx: Ctx): Node | null {
  const tuple = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
  const tailSchema = Array.isArray(s.prefixItems)
    ? s.items
    : Array.isArray(s.items)
    ? s.additionalItems
    : s.items;
  let min = count(s, "minItems") ?? 0;
  if (min > MAX_ITEMS_BOUND) min = 0;
  let max = count(s, "maxItems") ?? Infinity;
  if (max > MAX_ITEMS_BOUND) max = Infinity;
  if (max < min) return NOTHING;

  const prefix: Node[] = [];
  for (const sub of tuple) {
    if (prefix.length >= max) break;
    const v = valueOf(sub, level + 1, ctx);
    if (v !== null) prefix.push(v);
    else if (prefix.length < min) {
      if (!ctx.fallback) return null;
      prefix.push(anyAt(level + 1, ctx));
    } else {
      // A cut item ends the array there.
      max = prefix.length;
      break;
    }
  }
  const t = tailSchema === false ? NOTHING : valueOf(tailSchema ?? true, level + 1, ctx);
  if (t === null && min > prefix.length && !ctx.fallback) return null;
  const tail = t ?? (min > prefix.length ? anyAt(level + 1, ctx) : NOTHING);

  // after(i): what follows once i items are written.
  const after = (i: number): Node => {
    if (i >= max) return EMPTY;
    if (i >= prefix.length) return repeatNode(seqNode(COMMA, tail), Math.max(0, min - i), max - i);
    const more = seqNode(COMMA, prefix[i], after(i + 1));
    return i >= min ? optNode(more) : more;
  };
  let items: Node;
  if (prefix.length === 0) items = repeatNode(tail, min, max, COMMA);
  else {
    const some = seqNode(prefix[0], after(1));
    items = min === 0 ? optNode(some) : some;
  }
  return seqNode(literalNode("["), items, literalNode("]"));
}
