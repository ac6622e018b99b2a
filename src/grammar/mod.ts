/**
 * Constrained decoding's CPU half: JSON schemas, any-JSON-object and forced tool calls compiled to the byte
 * automaton (dfa.ts) that the GPU masks logits with.
 * @module
 */
export { type ByteDfa, DEAD } from "./dfa.ts";
export { compileNode, type CompileOptions, DEFAULT_MAX_STATES } from "./compile.ts";
export {
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
} from "./regex.ts";
export { anyValueNode, jsonLiteralNode, stringNode } from "./json.ts";
export { compileJsonObject, compileJsonSchema, type JsonGrammarOptions, jsonValueNode } from "./schema.ts";
export {
  CALL_PREFIX,
  CALL_SUFFIX,
  callHead,
  compileToolCall,
  type ForcedChoice,
  namedCallPrefix,
  toolCallNode,
  type ToolSpec,
} from "./tool_call.ts";
export { accepts, walk } from "./walk.ts";
