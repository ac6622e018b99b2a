/**
 * Seeded random schemas (schema_gen.ts) through the full exercise: every one compiles within the state
 * limit to a sound automaton that accepts its random instances, rejects their invalid mutants and broken
 * text, and whose random walks are valid instances.
 */
import { describe, expect, test } from "vitest";
import { compileJsonSchema } from "../../src/grammar/schema.ts";
import { exercise, type Tally } from "./check.ts";
import { Rng } from "./dfa_util.ts";
import { randomSchema } from "./schema_gen.ts";

describe("random schemas", () => {
  for (let batch = 0; batch < 4; batch++) {
    test(`seeds ${batch * 20 + 1} to ${batch * 20 + 20}`, () => {
      const total: Tally = { accepted: 0, mutantsRejected: 0, textRejected: 0, walked: 0 };
      for (let seed = batch * 20 + 1; seed <= batch * 20 + 20; seed++) {
        const schema = randomSchema(new Rng(seed));
        const dfa = compileJsonSchema(schema);
        const t = exercise(dfa, schema, new Rng(seed * 7 + 3), { instances: 15, walks: 40 });
        for (const k of Object.keys(total) as (keyof Tally)[]) total[k] += t[k];
      }
      expect(total.accepted).toBe(20 * 15 * 3);
      expect(total.mutantsRejected).toBeGreaterThan(20 * 15);
      expect(total.textRejected).toBeGreaterThan(20 * 15 * 3);
      expect(total.walked).toBe(20 * 40);
    });
  }
});
