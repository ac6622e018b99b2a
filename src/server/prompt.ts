/**
 * From API messages (already normalised by openai.ts / anthropic.ts) to prompt ids through the model's chat
 * template. Templates that render tools natively get tools, tool_calls and tool messages as they are;
 * for templates that ignore them (a plain ChatML) we write the Hermes convention ourselves, as llama-server
 * does: a tool system prompt, calls inline as `<tool_call>` text, results as `<tool_response>` user turns.
 * @module
 */
import type { ChatMessage, Tokenizer } from "../loader/tokenizer.ts";
import { CALL_PREFIX, namedCallPrefix } from "../grammar/tool_call.ts";
import { formatCall } from "./tools.ts";

export interface ToolDef {
  name: string;
  description?: string;
  /** JSON Schema of the arguments (an object). */
  parameters: Record<string, unknown>;
}

export interface ToolCallIn {
  id: string;
  name: string;
  /** Parsed arguments (an object), or the raw text when the client's arguments were not JSON. */
  arguments: unknown;
}

/** One turn in a conversation, the same for both APIs. */
export interface Turn {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  toolCalls?: ToolCallIn[];
  toolCallId?: string;
  name?: string;
}

export type ToolChoice = "auto" | "none" | "required" | { name: string };

/** What the reply must be: free text, any JSON object, or JSON of a schema (OpenAI response_format). */
export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; schema: Record<string, unknown> };

export interface PromptSpec {
  turns: Turn[];
  tools: ToolDef[];
  toolChoice: ToolChoice;
  responseFormat?: ResponseFormat;
}

/** What compacting the history cannot remove: the system turns, the tools, and the last user turn onward. */
export function fixedSpec(spec: PromptSpec): PromptSpec {
  let last = spec.turns.length - 1;
  while (last > 0 && spec.turns[last].role !== "user") last--;
  return { ...spec, turns: spec.turns.filter((t, i) => t.role === "system" || i >= last) };
}

/** Characters of the messages, which every template carries whole (a lower bound on the prompt's length). */
export function specChars(spec: PromptSpec): number {
  let n = 0;
  for (const t of spec.turns) {
    n += t.content.length;
    for (const c of t.toolCalls ?? []) {
      n += c.name.length +
        (typeof c.arguments === "string" ? c.arguments.length : JSON.stringify(c.arguments).length);
    }
  }
  return n;
}

export interface RenderedPrompt {
  ids: number[];
  /**
   * Text the template put after the generation prompt to force a call (tool_choice); parsed with the output.
   */
  forced: string;
  /** Tool-call parsing applies to the output. */
  parseTools: boolean;
}

interface TemplateCaps {
  tools: boolean;
}
const capsCache = new WeakMap<Tokenizer, TemplateCaps>();

/** Whether the template renders `tools`: render once with a probe tool and look for its name. */
export function templateCaps(tok: Tokenizer): TemplateCaps {
  let caps = capsCache.get(tok);
  if (!caps) {
    const probe = "flint_probe_fn_7f3a";
    let tools = false;
    try {
      const text = tok.applyChatTemplate([{ role: "user", content: "hi" }], {
        tools: [{
          type: "function",
          function: { name: probe, description: "", parameters: { type: "object", properties: {} } },
        }],
      });
      tools = text.includes(probe);
    } catch {
      tools = false;
    }
    caps = { tools };
    capsCache.set(tok, caps);
  }
  return caps;
}

/** The Hermes/Qwen2.5 tool system prompt. */
export function hermesToolPrompt(tools: ToolDef[]): string {
  const sigs = tools.map((t) =>
    JSON.stringify({
      type: "function",
      function: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        parameters: t.parameters,
      },
    })
  );
  return "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
    sigs.join("\n") +
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
    "<tool_call></tool_call> XML tags:\n<tool_call>\n" +
    '{"name": <function-name>, "arguments": <args-json-object>}' +
    "\n</tool_call>";
}

/** Messages in the template's vocabulary: native tool fields, or Hermes text. */
export function templateMessages(
  spec: PromptSpec,
  native: boolean,
): { messages: ChatMessage[]; tools?: unknown[] } {
  const offerTools = spec.toolChoice !== "none" && spec.tools.length > 0;
  if (native) {
    const messages = spec.turns.map((t): ChatMessage => {
      const m: ChatMessage = { role: t.role, content: t.content };
      if (t.toolCalls?.length) {
        m.tool_calls = t.toolCalls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        }));
      }
      if (t.toolCallId !== undefined) m.tool_call_id = t.toolCallId;
      if (t.name !== undefined) m.name = t.name;
      return m;
    });
    const tools = offerTools
      ? spec.tools.map((t) => ({
        type: "function",
        function: { name: t.name, description: t.description ?? "", parameters: t.parameters },
      }))
      : undefined;
    return { messages, tools };
  }
  const messages: ChatMessage[] = [];
  let prevTool = false;
  for (const t of spec.turns) {
    if (t.role === "tool") {
      // Consecutive results share one user turn, as in the Qwen2.5 template.
      const block = `<tool_response>\n${t.content}\n</tool_response>`;
      if (prevTool) messages[messages.length - 1].content += "\n" + block;
      else messages.push({ role: "user", content: block });
      prevTool = true;
      continue;
    }
    prevTool = false;
    let content = t.content;
    if (t.toolCalls?.length) {
      const calls = t.toolCalls.map((c) => formatCall(c.name, c.arguments)).join("\n");
      content = content ? `${content}\n${calls}` : calls;
    }
    messages.push({ role: t.role, content });
  }
  if (offerTools) {
    const sys = hermesToolPrompt(spec.tools);
    if (messages[0]?.role === "system") messages[0].content = `${messages[0].content}\n\n${sys}`;
    else messages.unshift({ role: "system", content: sys });
  }
  return { messages };
}

/** Text appended after the generation prompt so the model starts a call (tool_choice required or named). */
export function forcedPrefix(choice: ToolChoice, tools: ToolDef[]): string {
  if (!tools.length || choice === "auto" || choice === "none") return "";
  // The output grammar (constraint.ts) continues exactly from these.
  return choice === "required" ? CALL_PREFIX : namedCallPrefix(choice.name);
}

/** Renders and tokenizes a conversation. */
export function renderChat(tok: Tokenizer, spec: PromptSpec): RenderedPrompt {
  const native = templateCaps(tok).tools;
  const { messages, tools } = templateMessages(spec, native);
  const forced = forcedPrefix(spec.toolChoice, spec.tools);
  const text = tok.applyChatTemplate(messages, { tools }) + forced;
  return { ids: tok.encode(text), forced, parseTools: spec.toolChoice !== "none" && spec.tools.length > 0 };
}
