/**
 * Anthropic Messages request bodies → our request model. Content blocks map to turns: tool_use blocks
 * become the assistant's tool calls, each tool_result a tool turn; thinking blocks are dropped (this model
 * does not think, and templates do not render them).
 * @module
 */
import type { SamplingParams } from "../engine/slots.ts";
import { ValidationError } from "../errors.ts";
import { sampling } from "./job.ts";
import type { PromptSpec, ToolCallIn, ToolChoice, ToolDef, Turn } from "./prompt.ts";
import { Fields, readSchema, readStops } from "./validate.ts";

export interface MessagesParams {
  model: string;
  spec: PromptSpec;
  maxTokens: number;
  stream: boolean;
  stop: string[];
  sampling: SamplingParams;
}

const DROPPED = new Set(["thinking", "redacted_thinking"]);

function unsupported(f: Fields, type: string): never {
  throw new ValidationError(
    `${f.p("type")} "${type}" is not supported: this server reads text, tool_use and tool_result blocks`,
    f.p("type"),
  );
}

/** Text of a string or an array of text blocks (tool_result content, system). */
function textOf(f: Fields, key: string): string {
  const v = f.raw(key);
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) {
    throw new ValidationError(`${f.p(key)} must be a string or an array of text blocks`, f.p(key));
  }
  return v.map((b, i) => {
    const bf = Fields.of(b, `${f.p(key)}[${i}]`);
    const type = bf.string("type");
    if (type !== "text") unsupported(bf, type);
    return bf.string("text");
  }).join("\n");
}

function readTurns(messages: unknown[]): Turn[] {
  const turns: Turn[] = [];
  messages.forEach((m, i) => {
    const mf = Fields.of(m, `messages[${i}]`);
    // Claude Code sends system messages mid-conversation (its reminders); they stay where they are.
    const role = mf.oneOf("role", ["user", "assistant", "system"] as const);
    if (role === "system") {
      turns.push({ role, content: textOf(mf, "content") });
      return;
    }
    const v = mf.raw("content");
    if (typeof v === "string") {
      turns.push({ role, content: v });
      return;
    }
    const blocks = mf.array("content");
    if (role === "assistant") {
      let text = "";
      const calls: ToolCallIn[] = [];
      blocks.forEach((b, k) => {
        const bf = Fields.of(b, mf.p(`content[${k}]`));
        const type = bf.string("type");
        if (type === "text") text += bf.string("text");
        else if (type === "tool_use") {
          calls.push({
            id: bf.string("id"),
            name: bf.string("name", { nonEmpty: true }),
            arguments: bf.object("input").o,
          });
        } else if (!DROPPED.has(type)) unsupported(bf, type);
      });
      turns.push({ role, content: text, ...(calls.length ? { toolCalls: calls } : {}) });
      return;
    }
    // user: consecutive text blocks form one turn; each tool_result is a tool turn, in order.
    let pending: string | null = null;
    const flush = () => {
      if (pending !== null) turns.push({ role: "user", content: pending });
      pending = null;
    };
    blocks.forEach((b, k) => {
      const bf = Fields.of(b, mf.p(`content[${k}]`));
      const type = bf.string("type");
      if (type === "text") pending = (pending === null ? "" : pending + "\n") + bf.string("text");
      else if (type === "tool_result") {
        flush();
        const body = textOf(bf, "content");
        turns.push({
          role: "tool",
          toolCallId: bf.string("tool_use_id"),
          content: bf.optBool("is_error") ? `Error: ${body}` : body,
        });
      } else unsupported(bf, type);
    });
    flush();
    if (!blocks.length) turns.push({ role: "user", content: "" });
  });
  return turns;
}

function readTools(f: Fields): { tools: ToolDef[]; toolChoice: ToolChoice } {
  const names = new Set<string>();
  const tools = (f.optArray("tools") ?? []).map((t, i): ToolDef => {
    const tf = Fields.of(t, `tools[${i}]`);
    const type = tf.optString("type");
    if (type !== undefined && type !== "custom") {
      throw new ValidationError(
        `${tf.p("type")} "${type}": built-in server tools are not supported; define a custom tool`,
        tf.p("type"),
      );
    }
    const name = tf.string("name", { nonEmpty: true });
    if (names.has(name)) {
      throw new ValidationError(`tools[${i}]: duplicate tool name "${name}"`, tf.p("name"));
    }
    names.add(name);
    return {
      name,
      description: tf.optString("description"),
      parameters: readSchema(tf, "input_schema", true),
    };
  });
  let toolChoice: ToolChoice = "auto";
  const tc = f.optObject("tool_choice");
  if (tc) {
    const type = tc.oneOf("type", ["auto", "any", "tool", "none"] as const);
    if (type === "any") toolChoice = "required";
    else if (type === "none") toolChoice = "none";
    else if (type === "tool") {
      const name = tc.string("name");
      if (!names.has(name)) {
        throw new ValidationError(`tool_choice names "${name}", which is not in tools`, "tool_choice.name");
      }
      toolChoice = { name };
    }
    if ((type === "any" || type === "tool") && !tools.length) {
      throw new ValidationError(`tool_choice "${type}" needs tools`, "tool_choice");
    }
  }
  return { tools, toolChoice };
}

/** The prompt part of a request (shared with count_tokens). */
export function readPromptSpec(f: Fields): PromptSpec {
  const turns = readTurns(f.array("messages", { nonEmpty: true }));
  if (f.has("system")) turns.unshift({ role: "system", content: textOf(f, "system") });
  return { turns, ...readTools(f) };
}

export function readMessagesRequest(f: Fields): MessagesParams {
  const model = f.string("model", { nonEmpty: true });
  if (!f.has("max_tokens")) throw new ValidationError("max_tokens is required", "max_tokens");
  const maxTokens = f.number("max_tokens", { integer: true, min: 1 });
  const spec = readPromptSpec(f);
  // Structured output: the reply is JSON of the schema (decoding is constrained to it).
  const format = f.optObject("output_config")?.optObject("format");
  if (format) {
    format.oneOf("type", ["json_schema"] as const);
    spec.responseFormat = {
      type: "json_schema",
      schema: readSchema(format, "schema", true, { objectRoot: false }),
    };
  }
  return {
    model,
    spec,
    maxTokens,
    stream: f.optBool("stream") ?? false,
    stop: readStops(f, "stop_sequences"),
    sampling: sampling({
      temperature: f.optNumber("temperature", { min: 0, max: 1 }),
      topP: f.optNumber("top_p", { min: 0, max: 1 }),
      topK: f.optNumber("top_k", { integer: true, min: 0 }),
    }),
  };
}
