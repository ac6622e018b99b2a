/**
 * A regex AST (regex.ts) to the ByteDfa the GPU runs (dfa.ts): Thompson NFA, subset construction, trimming,
 * minimization, `dist`. Each stage has a state cap so that a schema too complex to enforce fails fast with
 * a ValidationError instead of hanging.
 * @module
 */
import { ValidationError } from "../errors.ts";
import { type ByteDfa, DEAD } from "./dfa.ts";
import { minimize } from "./minimize.ts";
import { buildNfa, TooManyStates } from "./nfa.ts";
import type { Node } from "./regex.ts";
import { determinize } from "./subset.ts";

export interface CompileOptions {
  /** Most states the final automaton may have (default 4096, at most 65535). */
  maxStates?: number;
  /** The request field that errors name (ValidationError's `param`). */
  param?: string | null;
}

export const DEFAULT_MAX_STATES = 4096;

/**
 * Compiles a grammar to a minimal ByteDfa: start state 0, every state live. Throws ValidationError when it
 * matches nothing or needs more than `maxStates` states.
 *
 * @example
 * const dfa = compileNode(seqNode(literalNode("a"), starNode(literalNode("b")))); // ab*
 * accepts(dfa, "abbb"); // true
 */
export function compileNode(node: Node, opts: CompileOptions = {}): ByteDfa {
  const maxStates = Math.min(opts.maxStates ?? DEFAULT_MAX_STATES, DEAD);
  const param = opts.param ?? null;
  let result: ByteDfa | number | null;
  try {
    // The intermediate automata may be larger than the minimal one, within bounds: the grammars json.ts
    // and schema.ts build determinize to little more than their minimal size.
    const nfa = buildNfa(node, Math.max(maxStates * 32, 65536));
    result = minimize(determinize(nfa, Math.max(maxStates * 4, 4096)), maxStates);
  } catch (e) {
    // The NFA builder recurses along the grammar: thousands of properties can overflow the stack.
    if (e instanceof RangeError && /call stack/i.test(e.message)) {
      throw new ValidationError(`${tooComplex(maxStates)} (too many nested or consecutive parts)`, param);
    }
    if (!(e instanceof TooManyStates)) throw e;
    throw new ValidationError(`${tooComplex(maxStates)} (${e.stage} passed ${e.limit} states)`, param);
  }
  if (result === null) {
    throw new ValidationError("the schema allows no value: nothing can be generated", param);
  }
  if (typeof result === "number") {
    throw new ValidationError(`${tooComplex(maxStates)} (it needs ${result})`, param);
  }
  return result;
}

const tooComplex = (maxStates: number) =>
  `the schema is too complex to enforce: more than ${maxStates} automaton states`;
