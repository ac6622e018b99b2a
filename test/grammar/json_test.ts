/**
 * JSON text grammar against JSON.parse and a strict UTF-8 decoder as oracles: string bodies over every
 * one- and two-byte sequence and random longer ones, numbers over every short string of number characters,
 * the whitespace policy, and free JSON (json_object) with its depth bound.
 */
import { describe, expect, test } from "vitest";
import { compileNode } from "../../src/grammar/compile.ts";
import { anyValueNode, JSON_INTEGER, JSON_NUMBER, JSON_STRING, stringNode } from "../../src/grammar/json.ts";
import { compileJsonObject, compileJsonSchema } from "../../src/grammar/schema.ts";
import { accepts } from "../../src/grammar/walk.ts";
import { decodeStrict, dfaProblems, mooreClasses, randomWalk, Rng } from "./dfa_util.ts";
import { instance } from "./json_model.ts";
import { serialize } from "./json_text.ts";

const QUOTE = 0x22;
const utf8 = new TextEncoder();

/** Whether `"` + body + `"` is a JSON string: valid UTF-8 that JSON.parse reads as a string. */
function isJsonString(body: number[]): boolean {
  try {
    return typeof JSON.parse(decodeStrict(Uint8Array.from([QUOTE, ...body, QUOTE]))) === "string";
  } catch {
    return false;
  }
}

describe("JSON strings", () => {
  const dfa = compileNode(JSON_STRING);

  test("is a sound, minimal automaton", () => {
    expect(dfaProblems(dfa)).toEqual([]);
    expect(mooreClasses(dfa)).toBe(dfa.states);
  });

  test("every body of one or two bytes: accepted exactly when JSON.parse and strict UTF-8 accept it", () => {
    for (let x = 0; x < 256; x++) {
      expect(accepts(dfa, [QUOTE, x, QUOTE]), `byte ${x}`).toBe(isJsonString([x]));
      for (let y = 0; y < 256; y++) {
        if (accepts(dfa, [QUOTE, x, y, QUOTE]) !== isJsonString([x, y])) {
          expect.fail(`bytes ${x.toString(16)} ${y.toString(16)}: grammar and JSON.parse disagree`);
        }
      }
    }
  });

  test("random bodies from valid characters, escapes and stray bytes near the UTF-8 boundaries", () => {
    const rng = new Rng(20240611);
    const stray = [
      0x5c,
      0x75,
      0x22,
      0x7f,
      0x80,
      0x8f,
      0x90,
      0x9f,
      0xa0,
      0xbf,
      0xc0,
      0xc1,
      0xc2,
      0xdf,
      0xe0,
      0xe1,
      0xec,
      0xed,
      0xee,
      0xef,
      0xf0,
      0xf1,
      0xf3,
      0xf4,
      0xf5,
      0xff,
      0x00,
      0x1f,
    ];
    const edges = [
      0x80,
      0x7ff,
      0x800,
      0xfff,
      0x1000,
      0xd7ff,
      0xe000,
      0xfffd,
      0xffff,
      0x10000,
      0x3ffff,
      0x40000,
      0xfffff,
      0x100000,
      0x10ffff,
    ];
    const piece = (): number[] => {
      const k = rng.int(10);
      if (k < 4) {
        const cp = rng.chance(0.5) ? rng.pick(edges) : rng.range(0x20, 0x10ffff);
        return [...utf8.encode(String.fromCodePoint(cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp))];
      }
      if (k < 6) {
        return [...utf8.encode(rng.pick(["\\n", '\\"', "\\u00e9", "\\uD83D", "\\/", "\\u12", "\\q"]))];
      }
      return [rng.pick(stray)];
    };
    let valid = 0;
    for (let i = 0; i < 40000; i++) {
      const body = Array.from({ length: rng.range(1, 4) }, piece).flat();
      const want = isJsonString(body);
      valid += want ? 1 : 0;
      if (accepts(dfa, [QUOTE, ...body, QUOTE]) !== want) {
        expect.fail(`bytes ${body.map((x) => x.toString(16))}`);
      }
    }
    expect(valid).toBeGreaterThan(4000);
  });

  test("every escape JSON has, and none it lacks", () => {
    for (
      const e of [
        '\\"',
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u00e9",
        "\\uD83D\\uDE00",
        "\\uABCD",
      ]
    ) {
      expect(accepts(dfa, `"${e}"`), e).toBe(true);
    }
    for (const e of ["\\a", "\\x41", "\\u12", "\\u12g4", "\\U0041", "\\", "\\0"]) {
      expect(accepts(dfa, `"${e}"`), e).toBe(false);
    }
  });

  test("length bounds count characters: an escape or a 4-byte sequence is one", () => {
    const d = compileNode(stringNode(2, 3));
    expect(dfaProblems(d)).toEqual([]);
    for (
      const [s, ok] of [
        ["a", false],
        ["ab", true],
        ["abc", true],
        ["abcd", false],
        ["😀😀", true],
        ["😀😀😀😀", false],
        ["\\n\\u00e9", true],
        ["é", false],
        ["中中中", true],
        ["\\\\\\\\\\\\\\\\", false],
      ] as const
    ) {
      expect(accepts(d, `"${s}"`), s).toBe(ok);
    }
  });
});

describe("JSON numbers", () => {
  const number = compileNode(JSON_NUMBER), integer = compileNode(JSON_INTEGER);
  const CHARS = "0123456789-+.eE";

  test("every string of up to 4 number characters (and random longer ones): JSON.parse agrees", () => {
    expect(dfaProblems(number)).toEqual([]);
    expect(dfaProblems(integer)).toEqual([]);
    let layer = [""];
    const rng = new Rng(7);
    const randoms = Array.from(
      { length: 20000 },
      () => Array.from({ length: rng.range(5, 12) }, () => rng.pick([...CHARS, "0", "1", "9"])).join(""),
    );
    const all: string[] = [...randoms];
    for (let n = 1; n <= 4; n++) all.push(...(layer = layer.flatMap((s) => [...CHARS].map((ch) => s + ch))));
    let numbers = 0;
    for (const s of all) {
      let isNumber = false;
      try {
        isNumber = typeof JSON.parse(s) === "number";
      } catch { /* not JSON */ }
      numbers += isNumber ? 1 : 0;
      if (accepts(number, s) !== isNumber) expect.fail(`number ${s}`);
      if (accepts(integer, s) !== /^-?(0|[1-9][0-9]*)$/.test(s)) expect.fail(`integer ${s}`);
    }
    expect(numbers).toBeGreaterThan(2000);
  });
});

describe("whitespace policy and json_object", () => {
  const obj = compileJsonObject();

  test("one optional space after : and , and nowhere else", () => {
    for (
      const s of [
        '{"a":1,"b":[2,3]}',
        '{"a": 1, "b": [2, 3]}',
        '{"a":1, "b":[2,3]}',
        "{}",
        '{"a":{}}',
        '{"a": []}',
      ]
    ) {
      expect(accepts(obj, s), s).toBe(true);
    }
    for (
      const s of [
        ' {"a":1}',
        '{"a":1} ',
        '{ "a":1}',
        '{"a" :1}',
        '{"a":  1}',
        '{"a":1 }',
        '{"a":1,  "b":2}',
        '{"a":[1 ,2]}',
        '{"a":\n1}',
        '{"a":\t1}',
        "{ }",
        "[ ]",
        '{\n  "a": 1\n}',
        '{"a":[ 1]}',
      ]
    ) {
      expect(accepts(obj, s), s).toBe(false);
    }
  });

  test("json_object: any object, never another value, and nesting up to 4 containers", () => {
    expect(dfaProblems(obj)).toEqual([]);
    for (
      const s of [
        "[]",
        '"a"',
        "1",
        "null",
        "true",
        "{}{}",
        "{}}",
        '{"a"}',
        '{"a":}',
        "{1:2}",
        '{"a":1,}',
        "{,}",
      ]
    ) {
      expect(accepts(obj, s), s).toBe(false);
    }
    expect(accepts(obj, '{"a":[{"b":[1]}]}')).toBe(true);
    expect(accepts(obj, '{"a":[{"b":[[1]]}]}')).toBe(false);
    expect(accepts(obj, '{"a":[{"b":[]}],"c":{"d":{"e":{}}}}')).toBe(true);
  });

  test("random instances are accepted in every spacing; random walks parse to objects", () => {
    const rng = new Rng(99);
    for (let i = 0; i < 300; i++) {
      const v = instance({ type: "object" }, rng);
      for (const style of ["compact", "spaced", "mixed"] as const) {
        const text = serialize(v, style, rng);
        expect(accepts(obj, text), text).toBe(true);
      }
      const pretty = JSON.stringify(v, null, 2);
      if (pretty !== JSON.stringify(v)) expect(accepts(obj, pretty)).toBe(false);
    }
    for (let i = 0; i < 300; i++) {
      const v = JSON.parse(decodeStrict(randomWalk(obj, rng)));
      expect(v !== null && typeof v === "object" && !Array.isArray(v)).toBe(true);
    }
  });

  test("free values at each depth bound are sound and minimal; maxDepth moves the bound", () => {
    for (let d = 0; d <= 3; d++) {
      const dfa = compileNode(anyValueNode(d));
      expect(dfaProblems(dfa)).toEqual([]);
      expect(mooreClasses(dfa)).toBe(dfa.states);
      const nested = "[".repeat(d) + "0" + "]".repeat(d);
      expect(accepts(dfa, nested)).toBe(true);
      expect(accepts(dfa, "[" + nested + "]")).toBe(false);
    }
    const shallow = compileJsonSchema({}, { maxDepth: 2 });
    expect(accepts(shallow, '[{"a":1}]')).toBe(true);
    expect(accepts(shallow, '[{"a":[]}]')).toBe(false);
    const free = compileJsonSchema(true);
    expect(accepts(free, '[[[["x"]]]]')).toBe(true);
    expect(accepts(free, '[[[[["x"]]]]]')).toBe(false);
  });
});
