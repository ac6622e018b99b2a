/**
 * OpenAI request bodies → our request model: chat messages to turns, tools, tool_choice and sampling.
 * Unknown fields are ignored (clients send many); known fields with a wrong type or an unsupported value
 * are a ValidationError that names the field.
 * @module
 */
import type { SamplingParams } from "../engine/slots.ts";
import { ValidationError } from "../errors.ts";
import { sampling } from "./job.ts";
import type { ResponseFormat, ToolCallIn, ToolChoice, ToolDef, Turn } from "./prompt.ts";
import { Fields, readSchema, readStops } from "./validate.ts";

export interface CommonParams {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | null;
  sampling: SamplingParams;
  stop: string[];
}

/** Fields both /v1/chat/completions and /v1/completions share. */
export function readCommon(f: Fields, defaultMaxTokens: number | null): CommonParams {
  const model = f.string("model", { nonEmpty: true });
  const n = f.optNumber("n", { integer: true, min: 1 });
  if (n !== undefined && n !== 1) {
    throw new ValidationError(`n = ${n} is not supported: this server returns one choice per request`, "n");
  }
  const bestOf = f.optNumber("best_of", { integer: true, min: 1 });
  if (bestOf !== undefined && bestOf !== 1) {
    throw new ValidationError("best_of > 1 is not supported", "best_of");
  }
  if (f.has("logprobs") && f.raw("logprobs") !== false && f.raw("logprobs") !== 0) {
    throw new ValidationError("logprobs are not supported by this server", "logprobs");
  }
  if (f.optNumber("top_logprobs", { integer: true, min: 0 })) {
    throw new ValidationError("top_logprobs is not supported", "top_logprobs");
  }
  const stream = f.optBool("stream") ?? false;
  const so = f.optObject("stream_options");
  const maxTokens = f.optNumber("max_completion_tokens", { integer: true, min: 1 }) ??
    f.optNumber("max_tokens", { integer: true, min: 1 }) ?? defaultMaxTokens;
  return {
    model,
    stream,
    includeUsage: so?.optBool("include_usage") ?? false,
    maxTokens,
    stop: readStops(f, "stop"),
    sampling: sampling({
      temperature: f.optNumber("temperature", { min: 0, max: 2 }),
      topP: f.optNumber("top_p", { min: 0, max: 1 }),
      topK: f.optNumber("top_k", { integer: true, min: 0 }),
      minP: f.optNumber("min_p", { min: 0, max: 1 }),
      seed: f.optNumber("seed", { integer: true }),
      // Applied on the GPU over the last 64 tokens of the sequence, as llama-server does (sample.wgsl).
      frequencyPenalty: f.optNumber("frequency_penalty", { min: -2, max: 2 }),
      presencePenalty: f.optNumber("presence_penalty", { min: -2, max: 2 }),
    }),
  };
}

/** Message content: a string, or an array of text parts (anything else is not something we can read). */
function readText(f: Fields, key: string, nullable: boolean): string {
  const v = f.raw(key);
  if (v === undefined || v === null) {
    if (nullable) return "";
    throw new ValidationError(`${f.p(key)} is required`, f.p(key));
  }
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) {
    throw new ValidationError(`${f.p(key)} must be a string or an array of content parts`, f.p(key));
  }
  return v.map((part, i) => {
    const pf = Fields.of(part, `${f.p(key)}[${i}]`);
    const type = pf.string("type");
    if (type !== "text" && type !== "input_text") {
      throw new ValidationError(
        `${pf.p("type")} "${type}" is not supported: this model reads text only`,
        pf.p("type"),
      );
    }
    return pf.string("text");
  }).join("");
}

function parseArguments(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s; // keep what the client sent; the template shows it as is
  }
}

const ROLES = ["system", "developer", "user", "assistant", "tool"] as const;

export function readMessages(f: Fields): Turn[] {
  return f.array("messages", { nonEmpty: true }).map((m, i): Turn => {
    const mf = Fields.of(m, `messages[${i}]`);
    const role = mf.oneOf("role", ROLES);
    const turn: Turn = {
      role: role === "developer" ? "system" : role,
      content: readText(mf, "content", role === "assistant"),
    };
    const name = mf.optString("name");
    if (name !== undefined) turn.name = name;
    if (role === "tool") turn.toolCallId = mf.optString("tool_call_id");
    if (role === "assistant" && mf.has("tool_calls")) {
      turn.toolCalls = mf.array("tool_calls").map((c, k): ToolCallIn => {
        const cf = Fields.of(c, mf.p(`tool_calls[${k}]`));
        if (cf.has("type")) cf.oneOf("type", ["function"] as const);
        const fn = cf.object("function");
        const args = fn.has("arguments") ? fn.raw("arguments") : "{}";
        return {
          id: cf.optString("id") ?? `call_${i}_${k}`,
          name: fn.string("name", { nonEmpty: true }),
          arguments: typeof args === "string" ? parseArguments(args) : args,
        };
      });
    }
    return turn;
  });
}

export function readTools(f: Fields): { tools: ToolDef[]; toolChoice: ToolChoice } {
  const tools = (f.optArray("tools") ?? []).map((t, i): ToolDef => {
    const tf = Fields.of(t, `tools[${i}]`);
    tf.oneOf("type", ["function"] as const);
    const fn = tf.object("function");
    return {
      name: fn.string("name", { nonEmpty: true }),
      description: fn.optString("description"),
      parameters: readSchema(fn, "parameters", false),
    };
  });
  const names = new Set<string>();
  for (const [i, t] of tools.entries()) {
    if (names.has(t.name)) {
      throw new ValidationError(
        `tools[${i}]: duplicate function name "${t.name}"`,
        `tools[${i}].function.name`,
      );
    }
    names.add(t.name);
  }
  let toolChoice: ToolChoice = "auto";
  if (f.has("tool_choice")) {
    const v = f.raw("tool_choice");
    if (typeof v === "string") toolChoice = f.oneOf("tool_choice", ["auto", "none", "required"] as const);
    else {
      const cf = f.object("tool_choice");
      cf.oneOf("type", ["function"] as const);
      toolChoice = { name: cf.object("function").string("name") };
    }
  }
  if (typeof toolChoice === "object" && !names.has(toolChoice.name)) {
    throw new ValidationError(`tool_choice names "${toolChoice.name}", which is not in tools`, "tool_choice");
  }
  if (toolChoice === "required" && !tools.length) {
    throw new ValidationError(`tool_choice "required" needs tools`, "tool_choice");
  }
  return { tools, toolChoice };
}

/** response_format: text, any JSON object, or JSON of a schema; the JSON kinds constrain decoding. */
export function readResponseFormat(f: Fields): ResponseFormat | undefined {
  const rf = f.optObject("response_format");
  if (!rf) return undefined;
  const type = rf.oneOf("type", ["text", "json_object", "json_schema"] as const);
  if (type === "text") return undefined;
  if (type === "json_object") return { type };
  const js = rf.object("json_schema");
  js.string("name", { nonEmpty: true });
  return { type, schema: readSchema(js, "schema", true, { objectRoot: false }) };
}
