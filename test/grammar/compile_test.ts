/**
 * The regex-to-DFA pipeline on its own: each construct against JavaScript's RegExp on every short string
 * over a small alphabet and on random longer ones, the ByteDfa invariants, minimality (checked by an
 * independent Moore refinement), the state limit, and the empty language.
 */
import { describe, expect, test } from "vitest";
import { compileNode } from "../../src/grammar/compile.ts";
import { ValidationError } from "../../src/errors.ts";
import {
  altNode,
  bytesNode,
  classNode,
  EMPTY,
  literalNode,
  type Node,
  NOTHING,
  optNode,
  plusNode,
  repeatNode,
  seqNode,
  starNode,
} from "../../src/grammar/regex.ts";
import { accepts, walk } from "../../src/grammar/walk.ts";
import { DEAD } from "../../src/grammar/dfa.ts";
import { dfaProblems, mooreClasses, randomWalk, Rng } from "./dfa_util.ts";

const a = literalNode("a"), b = literalNode("b"), c = literalNode("c"), comma = literalNode(",");
const ab = altNode(a, b);

/** [name, node, equivalent RegExp over the alphabet "abc,"] */
const CASES: [string, Node, RegExp][] = [
  ["(a|b)*abb", seqNode(starNode(ab), literalNode("abb")), /^(a|b)*abb$/],
  [
    "[ab] repeated 2-4 times, comma-separated",
    repeatNode(classNode([0x61, 0x62]), 2, 4, comma),
    /^[ab](,[ab]){1,3}$/,
  ],
  ["comma list of ab|c", starNode(altNode(literalNode("ab"), c), comma), /^((ab|c)(,(ab|c))*)?$/],
  ["(a?){2,3}: items that may be empty", repeatNode(optNode(a), 2, 3), /^(a?){2,3}$/],
  ["(a*)*: a loop of loops", starNode(starNode(a)), /^(a*)*$/],
  ["(a?b?)+ with c between", plusNode(seqNode(optNode(a), optNode(b)), c), /^(a?b?)(c(a?b?))*$/],
  ["(a|bc){3,}", repeatNode(altNode(a, literalNode("bc")), 3, Infinity), /^(a|bc){3,}$/],
  ["(ab){0,3} with commas", repeatNode(literalNode("ab"), 0, 3, comma), /^((ab)(,ab){0,2})?$/],
  ["a(b|c)*a|c+", altNode(seqNode(a, starNode(altNode(b, c)), a), plusNode(c)), /^(a(b|c)*a|c+)$/],
  ["empty", EMPTY, /^$/],
  [
    "shared subtree",
    (() => {
      const x = seqNode(a, optNode(b));
      return seqNode(altNode(x, seqNode(c, x)), x);
    })(),
    /^(ab?|cab?)ab?$/,
  ],
];

const ALPHABET = "abc,";
function* allStrings(maxLen: number): Generator<string> {
  yield "";
  let layer = [""];
  for (let n = 1; n <= maxLen; n++) {
    layer = layer.flatMap((s) => [...ALPHABET].map((ch) => s + ch));
    yield* layer;
  }
}

describe("regex to DFA", () => {
  for (const [name, node, re] of CASES) {
    test(name, () => {
      const dfa = compileNode(node);
      expect(dfaProblems(dfa)).toEqual([]);
      expect(mooreClasses(dfa)).toBe(dfa.states);
      for (const s of allStrings(6)) expect(accepts(dfa, s), JSON.stringify(s)).toBe(re.test(s));
      const rng = new Rng(name.length * 7919);
      for (let i = 0; i < 300; i++) {
        const s = Array.from({ length: rng.range(7, 23) }, () => rng.pick([...ALPHABET])).join("");
        expect(accepts(dfa, s), s).toBe(re.test(s));
      }
      for (let i = 0; i < 50; i++) {
        const s = new TextDecoder().decode(randomWalk(dfa, rng, 20));
        expect(re.test(s), s).toBe(true);
      }
    });
  }

  test("(a|b)*abb minimizes to its textbook 4 states, dist counting down to the accepting one", () => {
    const dfa = compileNode(CASES[0][1]);
    expect(dfa.states).toBe(4);
    expect([...dfa.dist].sort()).toEqual([0, 1, 2, 3]);
    expect(dfa.dist[0]).toBe(3);
  });

  test("byte classes: every byte of a range, and none outside it", () => {
    const node = plusNode(classNode([0x00, 0x1f], 0x7f, [0xf0, 0xff]));
    const dfa = compileNode(node);
    expect(dfaProblems(dfa)).toEqual([]);
    for (let byte = 0; byte < 256; byte++) {
      const inside = byte <= 0x1f || byte === 0x7f || byte >= 0xf0;
      expect(accepts(dfa, [byte, byte]), `byte ${byte}`).toBe(inside);
    }
    expect(accepts(dfa, [])).toBe(false);
  });

  test("literal bytes beyond ASCII, and walk from a given state", () => {
    const dfa = compileNode(seqNode(bytesNode([0xe2, 0x82, 0xac]), literalNode("€")));
    expect(accepts(dfa, "€€")).toBe(true);
    expect(accepts(dfa, "€")).toBe(false);
    const mid = walk(dfa, [0xe2, 0x82]);
    expect(mid).not.toBe(DEAD);
    expect(dfa.accept[walk(dfa, [0xac, ...new TextEncoder().encode("€")], mid)]).toBe(1);
    expect(walk(dfa, [0xe2, 0x83])).toBe(DEAD);
    expect(walk(dfa, [0xe2, 0x83, 0x61, 0x62])).toBe(DEAD);
  });

  test("a language that needs more states than maxStates is refused with ValidationError", () => {
    // (a|b)*a(a|b){12}: the DFA must remember the last 13 bytes, 2^13 states.
    const node = seqNode(starNode(ab), a, repeatNode(ab, 12, 12));
    expect(compileNode(node, { maxStates: 9000 }).states).toBe(8192);
    let err: unknown;
    try {
      compileNode(node, { param: "response_format" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toMatch(
      /too complex to enforce: more than 4096 automaton states/,
    );
    expect((err as ValidationError).param).toBe("response_format");
  });

  test("an exponential blow-up stops early in the subset construction", () => {
    // 2^24 states if it ran to the end; the subset construction's cap stops it.
    const node = seqNode(starNode(ab), a, repeatNode(ab, 23, 23));
    expect(() => compileNode(node)).toThrow(/too complex to enforce: more than 4096 automaton states/);
  });

  test("a grammar that matches nothing is refused", () => {
    expect(() => compileNode(NOTHING)).toThrow(ValidationError);
    expect(() => compileNode(seqNode(a, altNode()))).toThrow(/allows no value/);
    // Dead branches are trimmed: only the live part remains.
    const dfa = compileNode(altNode(a, seqNode(b, { kind: "alt", items: [] })));
    expect(dfa.states).toBe(2);
    expect(accepts(dfa, "b")).toBe(false);
    expect(dfaProblems(dfa)).toEqual([]);
  });
});
