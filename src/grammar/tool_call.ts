/**
 * Forced tool calls (OpenAI `tool_choice` required or named, Anthropic `any` or `tool`) as grammars, in the
 * Hermes form tools.ts parses. The prompt ends with CALL_PREFIX, or with namedCallPrefix(name) when the tool
 * is named; the output then writes the rest of the call and CALL_SUFFIX. The prompt builder must end the
 * prompt with exactly these strings for the grammar to line up.
 * @module
 */
import { ValidationError } from "../errors.ts";
import { CALL_CLOSE, CALL_OPEN } from "../server/tools.ts";
import { compileNode, type CompileOptions } from "./compile.ts";
import type { ByteDfa } from "./dfa.ts";
import { altNode, literalNode, type Node, seqNode } from "./regex.ts";
import { type JsonGrammarOptions, jsonValueNode } from "./schema.ts";
import { isObject, mergeSchemas } from "./schema_merge.ts";

/** The end of the prompt when some tool must be called. */
export const CALL_PREFIX = `${CALL_OPEN}\n`;
/** What the output ends with once the call's JSON is written. */
export const CALL_SUFFIX = `\n${CALL_CLOSE}`;

/** The call's JSON up to its arguments, as written after CALL_PREFIX. */
export function callHead(name: string): string {
  return `{"name": ${JSON.stringify(name)}, "arguments": `;
}

/** The end of the prompt when the tool `name` must be called: the output starts with the arguments. */
export function namedCallPrefix(name: string): string {
  return CALL_PREFIX + callHead(name);
}

export interface ToolSpec {
  name: string;
  /** JSON Schema of the arguments; they are always an object. */
  parameters: Record<string, unknown>;
}

export type ForcedChoice = "required" | { name: string };

/**
 * The grammar of the output of a forced call: for "required", `{"name": "<tool>", "arguments": <args>}`
 * then CALL_SUFFIX, over all the tools; for a named tool, `<args>}` then CALL_SUFFIX.
 */
export function toolCallNode(tools: ToolSpec[], choice: ForcedChoice, opts: JsonGrammarOptions = {}): Node {
  const o = { param: "tools", ...opts };
  const args = (t: ToolSpec) => jsonValueNode(argumentsSchema(t.parameters), o);
  const end = literalNode(`}${CALL_SUFFIX}`);
  if (choice === "required") {
    if (tools.length === 0) {
      throw new ValidationError("tool_choice requires a tool, but no tools were given", "tools");
    }
    return altNode(...tools.map((t) => seqNode(literalNode(callHead(t.name)), args(t), end)));
  }
  const tool = tools.find((t) => t.name === choice.name);
  if (!tool) {
    throw new ValidationError(`tool_choice names "${choice.name}", which is not in tools`, "tool_choice");
  }
  return seqNode(args(tool), end);
}

/** The DFA of toolCallNode. */
export function compileToolCall(
  tools: ToolSpec[],
  choice: ForcedChoice,
  opts: JsonGrammarOptions & CompileOptions = {},
): ByteDfa {
  const o = { param: "tools", ...opts };
  return compileNode(toolCallNode(tools, choice, o), o);
}

/** Arguments are an object (tools.ts rejects anything else), whatever else the schema says. */
function argumentsSchema(parameters: unknown): unknown {
  if (!isObject(parameters)) return { type: "object" };
  return mergeSchemas(parameters, { type: "object" }) ?? parameters;
}
