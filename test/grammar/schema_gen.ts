/**
 * Seeded random JSON schemas in the supported subset: objects of odd sizes with optional properties,
 * nesting, enums and consts of every JSON type, nullable types, anyOf/oneOf, simple allOf, tuples, bounded
 * strings and arrays, free values, and `$ref` into `$defs`, one of them recursive. Every schema has valid
 * instances inside the grammar's recursion limit, and stays small enough to compile.
 */
import type { Rng } from "./dfa_util.ts";

type Schema = Record<string, unknown>;

const NAMES = [
  "id",
  "name",
  "path",
  "file_path",
  "mode",
  "count",
  "x-y",
  "with space",
  'quo"te',
  "ключ",
  "😀",
  "",
  "a",
  "ab",
  "abc",
  "limit",
  "tags",
  "meta",
  "items",
  "kind",
  "value",
  "next",
];

const ENUMS: unknown[][] = [
  ["pending", "in_progress", "completed"],
  ["a", "ab", "abc", "b"],
  [1, 2, 3, 10, -4],
  ["x", 1, null, true],
  [{ k: "v" }, [1, "two"], "plain", 0.5],
  ["ünï", "日本", "😀", 'quo"te', "back\\slash", "new\nline"],
];

export function randomSchema(rng: Rng): Schema {
  const g = new SchemaGen(rng);
  const root = g.object(0, rng.pick([1, 3, 5, 7]));
  if (g.defs.size) root.$defs = Object.fromEntries(g.defs);
  if (rng.chance(0.3)) root.title = "random";
  return root;
}

class SchemaGen {
  defs = new Map<string, Schema>();
  constructor(readonly rng: Rng) {}

  any(depth: number): unknown {
    const r = this.rng;
    const leaf = depth >= 3;
    const k = r.int(leaf ? 9 : 16);
    switch (k) {
      case 0:
        return { type: "string" };
      case 1:
        return { type: "string", minLength: r.range(0, 2), maxLength: r.range(3, 6) };
      case 2:
        return { type: "integer", minimum: 0 };
      case 3:
        return { type: "number" };
      case 4:
        return { type: "boolean" };
      case 5:
        return { enum: r.pick(ENUMS) };
      case 6:
        return { const: r.pick(r.pick(ENUMS)) };
      case 7:
        return { type: [r.pick(["string", "integer", "boolean"]), "null"], description: "nullable" };
      case 8:
        return r.pick([{}, true, { type: "string", format: "uri", pattern: "^h" }]);
      case 9:
      case 10:
        return this.object(depth + 1, r.pick([1, 2, 3, 5]));
      case 11:
        return this.array(depth);
      case 12:
        return { [r.pick(["anyOf", "oneOf"])]: [this.any(depth + 1), this.any(depth + 1)] };
      case 13:
        return {
          allOf: [
            { type: "object", properties: { p: { type: "string" } }, required: ["p"] },
            { properties: { q: this.any(depth + 2) } },
          ],
        };
      case 14:
        return this.ref(depth);
      default:
        return {
          type: "array",
          prefixItems: [{ type: "integer" }, { type: "string" }],
          minItems: 2,
          items: false,
        };
    }
  }

  object(depth: number, size: number): Schema {
    const r = this.rng;
    const names = r.shuffle(NAMES).slice(0, size);
    const properties: Schema = {};
    for (const n of names) properties[n] = this.any(depth);
    const required = names.filter(() => r.chance(0.5));
    const s: Schema = { properties };
    if (r.chance(0.8)) s.type = "object";
    if (required.length) s.required = required;
    if (r.chance(0.5)) s.additionalProperties = false;
    return s;
  }

  array(depth: number): Schema {
    const r = this.rng;
    const s: Schema = { type: "array", items: this.any(depth + 1) };
    if (r.chance(0.4)) s.minItems = r.range(0, 2);
    if (r.chance(0.4)) s.maxItems = r.range(2, 4);
    return s;
  }

  /** A reference to a shared definition, or to the recursive one (a tree whose children are optional). */
  ref(depth: number): Schema {
    const r = this.rng;
    if (r.chance(0.5)) {
      if (!this.defs.has("Node")) {
        this.defs.set("Node", {
          type: "object",
          properties: {
            label: { type: "string", maxLength: 4 },
            children: { type: "array", items: { $ref: "#/$defs/Node" } },
            parent: { anyOf: [{ $ref: "#/$defs/Node" }, { type: "null" }] },
          },
          required: ["label"],
        });
      }
      return { $ref: "#/$defs/Node", description: "a tree" };
    }
    const name = `Def${this.defs.size}`;
    // Reserve the name first: definitions made while building this one must not take it.
    this.defs.set(name, {});
    this.defs.set(name, this.object(depth + 2, r.pick([1, 2, 3])));
    return { $ref: `#/$defs/${name}` };
  }
}
