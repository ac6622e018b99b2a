/**
 * The grammar a request's output must follow, compiled in the prompt worker: a forced tool call
 * (tool_choice required or named: the prompt ends with the call's opening, prompt.ts) or a JSON
 * response_format. Unconstrained requests get none. Agents resend the same tools every turn, so compiled
 * automata are kept (by their source) and copies handed out (a copy's arrays move to the model worker).
 * @module
 */
import type { ByteDfa } from "../grammar/dfa.ts";
import { compileJsonObject, compileJsonSchema, compileToolCall } from "../grammar/mod.ts";
import type { PromptSpec } from "./prompt.ts";

const KEPT = 16;
const cache = new Map<string, ByteDfa>();

function copy(d: ByteDfa): ByteDfa {
  return { states: d.states, next: d.next.slice(), dist: d.dist.slice(), accept: d.accept.slice() };
}

function cached(key: string, compile: () => ByteDfa): ByteDfa {
  let d = cache.get(key);
  if (d) cache.delete(key); // re-inserted below as the most recent
  else d = compile();
  cache.set(key, d);
  while (cache.size > KEPT) cache.delete(cache.keys().next().value!);
  return copy(d);
}

/** Whether the spec forces a tool call (and so ends its prompt with the call's opening). */
export function forcesCall(spec: PromptSpec): boolean {
  return spec.tools.length > 0 && (spec.toolChoice === "required" || typeof spec.toolChoice === "object");
}

export function outputGrammar(spec: PromptSpec): ByteDfa | undefined {
  if (forcesCall(spec)) {
    const choice = spec.toolChoice as "required" | { name: string };
    const tools = spec.tools.map((t) => ({ name: t.name, parameters: t.parameters }));
    return cached(JSON.stringify(["call", tools, choice]), () => compileToolCall(tools, choice));
  }
  const rf = spec.responseFormat;
  if (rf?.type === "json_object") return cached("object", () => compileJsonObject());
  if (rf?.type === "json_schema") {
    return cached(JSON.stringify(["schema", rf.schema]), () => compileJsonSchema(rf.schema));
  }
  return undefined;
}
