/**
 * One routine that puts a compiled schema through everything: DFA invariants, random valid instances
 * accepted in every spacing, mutants the validator rejects rejected by the automaton too, text that is
 * never valid (bad escapes, broken UTF-8, trailing bytes, other whitespace) rejected, and random walks
 * that always parse to valid instances.
 */
import { expect } from "vitest";
import type { ByteDfa } from "../../src/grammar/dfa.ts";
import { accepts } from "../../src/grammar/walk.ts";
import { decodeStrict, dfaProblems, randomWalk, type Rng } from "./dfa_util.ts";
import { instance, validate } from "./json_model.ts";
import { BAD_IN_STRING, mutants, serialize, serializeWith, stringSlots, TRAILING } from "./json_text.ts";

export interface Exercise {
  instances?: number;
  walks?: number;
  maxDepth?: number;
}

/** What was checked, so a test can insist that each kind of check actually ran. */
export interface Tally {
  accepted: number;
  mutantsRejected: number;
  textRejected: number;
  walked: number;
}

const utf8 = new TextEncoder();

export function exercise(dfa: ByteDfa, schema: unknown, rng: Rng, opts: Exercise = {}): Tally {
  const t: Tally = { accepted: 0, mutantsRejected: 0, textRejected: 0, walked: 0 };
  expect(dfaProblems(dfa)).toEqual([]);
  const reject = (text: string | Uint8Array, why: string) => {
    expect(accepts(dfa, text), `${why}: ${typeof text === "string" ? text : new TextDecoder().decode(text)}`)
      .toBe(false);
    t.textRejected++;
  };
  for (let i = 0; i < (opts.instances ?? 30); i++) {
    const v = instance(schema, rng, { maxDepth: opts.maxDepth });
    expect(validate(schema, v), `generated instance ${JSON.stringify(v)}`).toBe(true);
    const compact = serialize(v, "compact");
    for (const text of [compact, serialize(v, "spaced"), serialize(v, "mixed", rng)]) {
      expect(accepts(dfa, text), `valid instance ${text}`).toBe(true);
      t.accepted++;
    }
    for (const m of mutants(v, rng, 4)) {
      if (validate(schema, m)) continue;
      expect(accepts(dfa, serialize(m, "compact")), `invalid ${serialize(m, "compact")}`).toBe(false);
      expect(accepts(dfa, serialize(m, "spaced")), `invalid ${serialize(m, "spaced")}`).toBe(false);
      t.mutantsRejected++;
    }
    const bytes = utf8.encode(compact);
    const slots = stringSlots(bytes);
    if (slots.length) {
      const at = rng.pick(slots);
      const bad = rng.pick(BAD_IN_STRING);
      reject(Uint8Array.from([...bytes.subarray(0, at), ...bad.bytes, ...bytes.subarray(at)]), bad.what);
    }
    reject(compact + rng.pick(TRAILING), "trailing bytes");
    reject(" " + compact, "leading space");
    const pretty = JSON.stringify(v, null, 2);
    if (pretty !== compact) reject(pretty, "pretty-printed");
    for (const [comma, colon] of [[",  ", ":"], [",", " :"], [" ,", ":"], [",", ":\t"], [",\n", ":"]]) {
      const text = serializeWith(v, comma, colon);
      if (text !== compact) reject(text, "whitespace outside the policy");
    }
  }
  for (let i = 0; i < (opts.walks ?? 100); i++) {
    const text = decodeStrict(randomWalk(dfa, rng));
    const v = JSON.parse(text);
    expect(validate(schema, v), `walk produced ${text}`).toBe(true);
    t.walked++;
  }
  return t;
}
