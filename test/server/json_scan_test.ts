/**
 * The incremental JSON checker behind streamed tool arguments: every prefix of valid JSON is accepted and
 * can be closed into JSON that parses; the first character that breaks JSON is refused; closing keeps what
 * was complete. Random values from a seeded generator, written compact and with spaces.
 */
import { describe, expect, test } from "vitest";
import { closeJson, JsonScanner } from "../../src/server/json_scan.ts";

function rng(seed: number): () => number {
  let x = seed >>> 0;
  return () => ((x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

function randomValue(r: () => number, depth: number): unknown {
  const k = Math.floor(r() * (depth > 3 ? 5 : 7));
  if (k === 0) return null;
  if (k === 1) return r() < 0.5;
  if (k === 2) return Math.round((r() - 0.5) * 1e6) / (r() < 0.5 ? 1 : 1000);
  if (k === 3 || k === 4) {
    const chars = ["a", "é", '"', "\\", "\n", " ", "}", "]", "𝄞", "\u0001", "x"];
    return Array.from({ length: Math.floor(r() * 6) }, () => chars[Math.floor(r() * chars.length)]).join("");
  }
  if (k === 5) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
  return Object.fromEntries(
    Array.from({ length: Math.floor(r() * 4) }, (_, i) => [`k${i}`, randomValue(r, depth + 1)]),
  );
}

function scanAll(text: string): { accepted: number; sc: JsonScanner } {
  const sc = new JsonScanner();
  let i = 0;
  for (; i < text.length; i++) if (!sc.push(text[i])) break;
  return { accepted: i, sc };
}

describe("JsonScanner", () => {
  test("valid JSON is accepted whole and done; every prefix closes into JSON that parses", () => {
    const r = rng(11);
    for (let n = 0; n < 150; n++) {
      const v = { args: randomValue(r, 0) };
      for (const text of [JSON.stringify(v), JSON.stringify(v, null, 1)]) {
        const { accepted, sc } = scanAll(text);
        expect(accepted, text).toBe(text.length);
        expect(sc.done).toBe(true);
        for (let cut = 1; cut < text.length; cut += 1 + Math.floor(r() * 3)) {
          const closed = closeJson(text.slice(0, cut));
          expect(closed, text.slice(0, cut)).not.toBeNull();
          expect(typeof closed).toBe("object");
        }
      }
    }
  });

  test("the first character that breaks JSON is refused", () => {
    const cases: [string, number][] = [
      ['{"a": 1,,}', 8],
      ["{oops}", 1],
      ['{"a" 1}', 5],
      ['{"a": tru}', 9],
      ['{"a": [1 2]}', 9],
      ['{"a": "x\\q"}', 9],
      ['{"a": 01}', 7],
      ['{"a": 1}}', 8],
      ['{"a": "\u0001"}', 7],
    ];
    for (const [text, at] of cases) {
      const { accepted } = scanAll(text);
      expect(accepted, text).toBe(at);
    }
  });

  test("closing keeps the complete part of a cut value", () => {
    expect(closeJson('{"path": "a.txt", "text": "hel')).toEqual({ path: "a.txt", text: "hel" });
    expect(closeJson('{"a": [1, 2, {"b": tr')).toEqual({ a: [1, 2, {}] });
    expect(closeJson('{"a": 1, "b')).toEqual({ a: 1 });
    expect(closeJson('{"n": 12.')).toEqual({ n: 12 });
    expect(closeJson("oops")).toBeNull();
  });
});
