/**
 * The JSON-Schema subset, keyword by keyword, on hand-written schemas: each one through the full exercise
 * (instances, mutants, broken text, random walks), plus exact accept/reject cases for the keywords whose
 * edges matter (property order, enum spacing, recursion limits, length and item bounds, false).
 */
import { describe, expect, test } from "vitest";
import { ValidationError } from "../../src/errors.ts";
import { compileJsonSchema } from "../../src/grammar/schema.ts";
import { accepts } from "../../src/grammar/walk.ts";
import { exercise } from "./check.ts";
import { Rng } from "./dfa_util.ts";

const SCHEMAS: Record<string, Record<string, unknown>> = {
  "a search tool": {
    type: "object",
    properties: {
      query: { type: "string", description: "what to look for" },
      limit: { type: "integer", minimum: 1 },
      mode: { type: "string", enum: ["fast", "thorough", "balanced"] },
      tags: { type: "array", items: { type: "string" }, maxItems: 3 },
      filters: {
        type: "object",
        properties: { lang: { type: "string", maxLength: 5 }, after: { type: "string", format: "date" } },
        required: ["lang"],
        additionalProperties: false,
      },
      score: { type: "number" },
      owner: { type: ["string", "null"] },
    },
    required: ["query", "mode"],
    additionalProperties: false,
  },
  "enum and const of every JSON type": {
    type: "object",
    properties: {
      e: { enum: ["a", 1, 2.5, null, true, { k: [1, "x"] }, [], 'quo"te', "é😀"] },
      c: { const: { nested: { deep: [false, null] } } },
      typed: { type: "string", enum: ["keep", 3, "also"] },
    },
    required: ["e", "c", "typed"],
  },
  "nullable and type lists": {
    type: "object",
    properties: {
      a: { type: ["string", "null"] },
      b: { type: "integer", nullable: true },
      c: { type: ["number", "boolean", "array"], items: { type: "integer" } },
    },
    required: ["a", "b", "c"],
  },
  "anyOf, oneOf and allOf": {
    type: "object",
    properties: {
      shape: {
        anyOf: [
          {
            type: "object",
            properties: { kind: { const: "circle" }, r: { type: "number" } },
            required: ["kind", "r"],
          },
          {
            type: "object",
            properties: { kind: { const: "square" }, side: { type: "number" } },
            required: ["kind"],
          },
        ],
      },
      id: { oneOf: [{ type: "integer" }, { type: "string", maxLength: 8 }] },
      both: {
        allOf: [
          { type: "object", properties: { x: { type: "integer" } }, required: ["x"] },
          { properties: { y: { type: "string" } }, required: ["y"] },
        ],
      },
    },
    required: ["shape", "id", "both"],
  },
  "$ref into $defs and definitions, with siblings": {
    type: "object",
    $defs: {
      Point: {
        type: "object",
        properties: { x: { type: "number" }, y: { type: "number" } },
        required: ["x", "y"],
      },
    },
    definitions: { Color: { type: "string", enum: ["red", "green"] } },
    properties: {
      from: { $ref: "#/$defs/Point" },
      to: { $ref: "#/$defs/Point", description: "end point" },
      color: { allOf: [{ $ref: "#/definitions/Color" }], default: "red" },
    },
    required: ["from", "to"],
  },
  "recursive tree": {
    $defs: {
      Node: {
        type: "object",
        properties: {
          name: { type: "string", minLength: 1, maxLength: 3 },
          children: { type: "array", items: { $ref: "#/$defs/Node" } },
        },
        required: ["name"],
        additionalProperties: false,
      },
    },
    $ref: "#/$defs/Node",
  },
  "arrays: tuples, bounds, free items": {
    type: "object",
    properties: {
      pair: {
        type: "array",
        prefixItems: [{ type: "integer" }, { type: "string" }],
        minItems: 2,
        items: false,
      },
      head: { type: "array", prefixItems: [{ const: "v1" }], items: { type: "boolean" }, maxItems: 4 },
      tagged: { type: "array", prefixItems: [{ type: "string" }], items: { type: "integer" }, minItems: 3 },
      few: { type: "array", items: { type: "integer" }, minItems: 2, maxItems: 3 },
      many: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 1000 },
      free: { type: "array" },
    },
    additionalProperties: false,
  },
  "open objects": {
    type: "object",
    properties: {
      labels: { type: "object", additionalProperties: { type: "string" } },
      meta: { type: "object" },
      none: { type: "object", additionalProperties: false },
    },
    required: ["labels"],
  },
  "strings with bounds": {
    type: "array",
    items: { type: "string", minLength: 2, maxLength: 4 },
    maxItems: 3,
  },
  "a scalar at the top": { type: "integer" },
};

describe("hand-written schemas", () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    test(name, () => {
      const t = exercise(compileJsonSchema(schema), schema, new Rng(name.length * 131 + 17), {
        instances: 40,
        walks: 150,
      });
      expect(t.accepted).toBe(120);
      expect(t.mutantsRejected).toBeGreaterThan(name === "a scalar at the top" ? 10 : 30);
      expect(t.walked).toBe(150);
    });
  }
});

const dfaOf = (schema: unknown) => compileJsonSchema(schema);

describe("keywords", () => {
  test("properties come in declared order; optional ones may be left out; no other keys", () => {
    const d = dfaOf({
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" }, c: { type: "integer" } },
      required: ["b"],
    });
    for (const s of ['{"b":1}', '{"a":1,"b":2}', '{"b":2,"c":3}', '{"a":1, "b":2, "c":3}']) {
      expect(accepts(d, s), s).toBe(true);
    }
    for (
      const s of [
        "{}",
        '{"a":1}',
        '{"b":1,"a":2}',
        '{"c":3,"b":2}',
        '{"b":1,"d":2}',
        '{"b":1,"b":1}',
        '{"a":1,,"b":2}',
      ]
    ) {
      expect(accepts(d, s), s).toBe(false);
    }
  });

  test("no properties and no type: required keys only; properties alone mean an object", () => {
    expect(accepts(dfaOf({ required: ["x"] }), '{"x":[1]}')).toBe(true);
    expect(accepts(dfaOf({ required: ["x"] }), "{}")).toBe(false);
    const d = dfaOf({ properties: { x: { type: "boolean" } } });
    expect(accepts(d, '{"x":true}')).toBe(true);
    expect(accepts(d, "true")).toBe(false);
  });

  test("enum objects and arrays follow the whitespace policy; strings only their JSON.stringify form", () => {
    const d = dfaOf({ enum: [{ a: [1, 2] }, "é"] });
    for (const s of ['{"a":[1,2]}', '{"a": [1, 2]}', '"é"']) expect(accepts(d, s), s).toBe(true);
    for (const s of ['{"a":[2,1]}', '{ "a":[1,2]}', '"\\u00e9"', '"e"']) expect(accepts(d, s), s).toBe(false);
  });

  test("recursion stops at depth 3: recursive parts are dropped, anyOf keeps its other branches", () => {
    const list = {
      $defs: {
        L: {
          type: "object",
          properties: { v: { type: "integer" }, next: { anyOf: [{ $ref: "#/$defs/L" }, { type: "null" }] } },
          required: ["v", "next"],
        },
      },
      $ref: "#/$defs/L",
    };
    const d = dfaOf(list);
    expect(accepts(d, '{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}')).toBe(true);
    expect(accepts(d, '{"v":1,"next":{"v":2,"next":{"v":3,"next":{"v":4,"next":null}}}}')).toBe(false);
  });

  test("recursion that cannot stop becomes any value where it is cut, not everywhere", () => {
    const d = dfaOf({
      $defs: { R: { type: "object", properties: { r: { $ref: "#/$defs/R" } }, required: ["r"] } },
      $ref: "#/$defs/R",
    });
    expect(accepts(d, '{"r":{"r":{"r":"anything"}}}')).toBe(true);
    expect(accepts(d, '{"r":1}')).toBe(false);
  });

  test("length and item bounds: small ones enforced, large ones ignored (minLength past 64 too)", () => {
    const s = dfaOf({ type: "string", minLength: 3, maxLength: 64 });
    expect(accepts(s, JSON.stringify("x".repeat(64)))).toBe(true);
    expect(accepts(s, JSON.stringify("x".repeat(65)))).toBe(false);
    expect(accepts(s, '"ab"')).toBe(false);
    expect(accepts(dfaOf({ type: "string", maxLength: 65 }), JSON.stringify("x".repeat(300)))).toBe(true);
    expect(accepts(dfaOf({ type: "string", minLength: 100 }), '""')).toBe(true);
    const a = dfaOf({ type: "array", items: { type: "integer" }, minItems: 2, maxItems: 9 });
    expect(accepts(a, "[1]")).toBe(false);
    expect(accepts(a, JSON.stringify(Array.from({ length: 30 }, (_, i) => i)))).toBe(true);
  });

  test("false, and schemas that leave nothing, are refused with ValidationError", () => {
    for (
      const s of [
        false,
        { type: "string", enum: [1, 2] },
        { type: "object", properties: { a: false }, required: ["a"] },
        { type: "string", minLength: 5, maxLength: 2 },
        { allOf: [{ type: "string" }, { type: "integer" }] },
      ]
    ) {
      expect(() => dfaOf(s), JSON.stringify(s)).toThrow(ValidationError);
    }
    // An optional property that can have no value is simply never written.
    const d = dfaOf({ type: "object", properties: { a: false, b: { type: "null" } } });
    expect(accepts(d, '{"b":null}')).toBe(true);
    expect(accepts(d, '{"a":null}')).toBe(false);
  });

  test("unknown and ignored keywords never fail", () => {
    const d = dfaOf({
      type: "object",
      properties: {
        n: { type: "number", minimum: 5, multipleOf: 3 },
        s: { type: "string", pattern: "^a", format: "email" },
      },
      "x-vendor": { whatever: true },
      unevaluatedProperties: false,
      $ref: "https://example.com/elsewhere.json",
    });
    expect(accepts(d, '{"n":1,"s":"b"}')).toBe(true);
    expect(accepts(d, '{"z":1}')).toBe(false);
  });

  test("a schema past maxStates gives ValidationError naming the field", () => {
    const wide = {
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: 40 }, (_, i) => [`p${i}`, { type: "string", maxLength: 60 }]),
      ),
    };
    let err: unknown;
    try {
      compileJsonSchema(wide);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toMatch(
      /^the schema is too complex to enforce: more than 4096 automaton states/,
    );
    expect((err as ValidationError).param).toBe("response_format");
  });

  test("schemas too deep or too long for the compiler's recursion are ValidationErrors too", () => {
    let deep: unknown = { type: "integer" };
    for (let i = 0; i < 1000; i++) deep = { type: "array", items: deep };
    expect(() => compileJsonSchema(deep)).toThrow(/nested too deeply/);
    const props = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`p${i}`, { type: "boolean" }]));
    expect(() => compileJsonSchema({ type: "object", properties: props }, { maxStates: 65535 }))
      .toThrow(ValidationError);
  });
});
