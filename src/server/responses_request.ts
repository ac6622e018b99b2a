/**
 * OpenAI Responses request bodies (POST /v1/responses, what Codex speaks) → our request model. Input items
 * become turns: messages of any role (developer → system) with input_text/output_text parts,
 * function_call items → the assistant's tool calls, function_call_output items → tool turns; reasoning
 * items are dropped. Function tools are read as they are, `namespace` tools flattened into their functions,
 * `custom` (freeform) tools offered as functions of one string `input`; any other type is a hosted tool
 * (web_search, tool_search, …): ignored and named in `notes`. Nothing is stored: `previous_response_id`
 * is refused.
 * @module
 */
import type { SamplingParams } from "../engine/slots.ts";
import { ValidationError } from "../errors.ts";
import { sampling } from "./job.ts";
import type { PromptSpec, ResponseFormat, ToolCallIn, ToolChoice, ToolDef, Turn } from "./prompt.ts";
import { Fields, readSchema } from "./validate.ts";

export interface ResponsesParams {
  model: string;
  spec: PromptSpec;
  /** null: the room the window leaves. */
  maxTokens: number | null;
  stream: boolean;
  sampling: SamplingParams;
  /** Names of freeform tools: their calls go back as custom_tool_call items with the raw `input`. */
  customTools: Set<string>;
  /** What the request asked for that this server ignores (hosted tools), for the response's header. */
  notes: string[];
  /** Request fields the response object echoes. */
  echo: Record<string, unknown>;
}

/** The text of message content: a string or parts of type input_text / output_text (/ refusal). */
function contentText(f: Fields, key: string): string {
  const v = f.raw(key);
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) {
    throw new ValidationError(`${f.p(key)} must be a string or an array of parts`, f.p(key));
  }
  return v.map((part, i) => {
    const pf = Fields.of(part, `${f.p(key)}[${i}]`);
    const type = pf.string("type");
    if (type === "input_text" || type === "output_text" || type === "text") return pf.string("text");
    if (type === "refusal") return pf.string("refusal");
    throw new ValidationError(
      `${pf.p("type")} "${type}" is not supported: this model reads text only`,
      pf.p("type"),
    );
  }).join("");
}

function parseArguments(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

function readInput(f: Fields): Turn[] {
  const v = f.raw("input");
  if (typeof v === "string") return [{ role: "user", content: v }];
  const turns: Turn[] = [];
  f.array("input", { nonEmpty: true }).forEach((item, i) => {
    const it = Fields.of(item, `input[${i}]`);
    const type = it.optString("type") ?? "message";
    const lastAssistant = () => {
      const last = turns[turns.length - 1];
      if (last?.role === "assistant") return last;
      const t: Turn = { role: "assistant", content: "" };
      turns.push(t);
      return t;
    };
    if (type === "message") {
      const role = it.oneOf("role", ["system", "developer", "user", "assistant"] as const);
      const content = contentText(it, "content");
      // Consecutive assistant items (text, then calls) are one turn.
      if (role === "assistant") lastAssistant().content += content;
      else turns.push({ role: role === "developer" ? "system" : role, content });
    } else if (type === "function_call" || type === "custom_tool_call") {
      const call: ToolCallIn = {
        id: it.string("call_id"),
        name: it.string("name", { nonEmpty: true }),
        arguments: type === "function_call"
          ? parseArguments(it.string("arguments"))
          : { input: it.string("input") },
      };
      const t = lastAssistant();
      (t.toolCalls ??= []).push(call);
    } else if (type === "function_call_output" || type === "custom_tool_call_output") {
      const out = it.raw("output");
      turns.push({
        role: "tool",
        toolCallId: it.string("call_id"),
        content: typeof out === "string" ? out : contentText(it, "output"),
      });
    } else if (type === "reasoning") {
      // This model does not reason in a separate channel; templates do not render it.
    } else {
      throw new ValidationError(
        `${it.p("type")} "${type}" is not supported: message, function_call, function_call_output, ` +
          `custom_tool_call, custom_tool_call_output and reasoning items are`,
        it.p("type"),
      );
    }
  });
  return turns;
}

function readTools(f: Fields, notes: string[], customTools: Set<string>): ToolDef[] {
  const tools: ToolDef[] = [];
  const add = (tf: Fields, prefix: string) => {
    const type = tf.string("type");
    if (type === "function") {
      tools.push({
        name: prefix + tf.string("name", { nonEmpty: true }),
        description: tf.optString("description"),
        parameters: readSchema(tf, "parameters", false),
      });
    } else if (type === "custom") {
      const name = prefix + tf.string("name", { nonEmpty: true });
      customTools.add(name);
      const format = tf.optObject("format");
      const grammar = format?.optString("definition");
      tools.push({
        name,
        description: [
          tf.optString("description"),
          grammar ? `The input follows this grammar:\n${grammar}` : "",
        ]
          .filter(Boolean).join("\n\n"),
        parameters: {
          type: "object",
          properties: { input: { type: "string", description: "the tool's raw input" } },
          required: ["input"],
        },
      });
    } else if (type === "namespace") {
      const ns = tf.string("name", { nonEmpty: true });
      tf.array("tools").forEach((t, k) => add(Fields.of(t, tf.p(`tools[${k}]`)), `${ns}.`));
    } else {
      // Hosted tools (web_search, tool_search, file_search, …) run on OpenAI's side; a local model has none.
      notes.push(`hosted tool "${type}" ignored`);
    }
  };
  (f.optArray("tools") ?? []).forEach((t, i) => add(Fields.of(t, `tools[${i}]`), ""));
  const names = new Set<string>();
  for (const t of tools) {
    if (names.has(t.name)) throw new ValidationError(`duplicate tool name "${t.name}"`, "tools");
    names.add(t.name);
  }
  return tools;
}

function readToolChoice(f: Fields, tools: ToolDef[]): ToolChoice {
  if (!f.has("tool_choice")) return "auto";
  const v = f.raw("tool_choice");
  let choice: ToolChoice;
  if (typeof v === "string") choice = f.oneOf("tool_choice", ["auto", "none", "required"] as const);
  else {
    const cf = f.object("tool_choice");
    const type = cf.string("type");
    if (type !== "function" && type !== "custom") {
      throw new ValidationError(
        `tool_choice type "${type}" is not supported here (hosted tools are ignored)`,
        "tool_choice",
      );
    }
    choice = { name: cf.string("name", { nonEmpty: true }) };
  }
  if (typeof choice === "object" && !tools.some((t) => t.name === (choice as { name: string }).name)) {
    throw new ValidationError(`tool_choice names "${choice.name}", which is not in tools`, "tool_choice");
  }
  if (choice === "required" && !tools.length) {
    throw new ValidationError(`tool_choice "required" needs tools`, "tool_choice");
  }
  return choice;
}

/** text.format: text, json_object, or json_schema (flat: name, schema, strict). */
function readFormat(f: Fields): ResponseFormat | undefined {
  const format = f.optObject("text")?.optObject("format");
  if (!format) return undefined;
  const type = format.oneOf("type", ["text", "json_object", "json_schema"] as const);
  if (type === "text") return undefined;
  if (type === "json_object") return { type };
  return { type, schema: readSchema(format, "schema", true, { objectRoot: false }) };
}

export function readResponsesRequest(f: Fields): ResponsesParams {
  const model = f.string("model", { nonEmpty: true });
  if (f.has("previous_response_id")) {
    throw new ValidationError(
      "previous_response_id is not supported: this server stores no responses; send the whole " +
        "conversation in input",
      "previous_response_id",
    );
  }
  const notes: string[] = [];
  const customTools = new Set<string>();
  const turns = readInput(f);
  const instructions = f.optString("instructions");
  if (instructions) turns.unshift({ role: "system", content: instructions });
  const tools = readTools(f, notes, customTools);
  const toolChoice = readToolChoice(f, tools);
  const responseFormat = readFormat(f);
  const maxTokens = f.optNumber("max_output_tokens", { integer: true, min: 1 }) ?? null;
  const temperature = f.optNumber("temperature", { min: 0, max: 2 });
  const topP = f.optNumber("top_p", { min: 0, max: 1 });
  return {
    model,
    spec: { turns, tools, toolChoice, responseFormat },
    maxTokens,
    stream: f.optBool("stream") ?? false,
    sampling: sampling({ temperature, topP, seed: f.optNumber("seed", { integer: true }) }),
    customTools,
    notes,
    echo: {
      instructions: instructions ?? null,
      max_output_tokens: maxTokens,
      metadata: f.raw("metadata") ?? {},
      parallel_tool_calls: f.optBool("parallel_tool_calls") ?? true,
      temperature: temperature ?? 1,
      top_p: topP ?? 1,
      tool_choice: f.raw("tool_choice") ?? "auto",
      tools: f.raw("tools") ?? [],
      text: f.raw("text") ?? { format: { type: "text" } },
      store: false,
      truncation: "disabled",
      reasoning: { effort: null, summary: null },
      user: f.raw("user") ?? null,
    },
  };
}
