/**
 * The table of bad requests test/server/bad_input_test.ts sends: body framing, OpenAI chat and completions
 * fields, Anthropic messages, routing, auth and admin, each with the status and error it must get.
 * @module
 */

const MODEL = "flint-coder-19m-mlx-4bit";

export interface Case {
  name: string;
  path: string;
  method?: string;
  /** An object is sent as JSON; a string or bytes as they are. */
  body?: unknown;
  headers?: Record<string, string>;
  auth?: boolean;
  status: number;
  /** Substring expected in the error message. */
  says?: string;
  /** OpenAI `code` or Anthropic `error.type` expected. */
  code?: string;
}

const user = [{ role: "user", content: "hi" }];
export const chat = (extra: Record<string, unknown>) => ({
  model: MODEL,
  messages: user,
  max_tokens: 4,
  ...extra,
});
const msgs = (extra: Record<string, unknown>) => ({ model: MODEL, messages: user, max_tokens: 4, ...extra });
const fn = (parameters: unknown) => ({ type: "function", function: { name: "f", parameters } });
export const C = "/v1/chat/completions";
const M = "/v1/messages";

export const CASES: Case[] = [
  // Body framing
  {
    name: "malformed JSON",
    path: C,
    body: '{"model": "x", "messages": [',
    status: 400,
    says: "not valid JSON",
  },
  { name: "JSON array body", path: C, body: "[1, 2]", status: 400, says: "must be a JSON object" },
  { name: "empty body", path: C, body: "", status: 400, says: "empty" },
  {
    name: "invalid UTF-8",
    path: C,
    body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
    status: 400,
    says: "UTF-8",
  },
  {
    name: "huge body (over --max-body-mb 1)",
    path: C,
    body: JSON.stringify(chat({ messages: [{ role: "user", content: "x".repeat(2 * 2 ** 20) }] })),
    status: 413,
  },
  { name: "deeply nested JSON", path: C, body: "[".repeat(100_000) + "]".repeat(100_000), status: 400 },
  // OpenAI chat fields
  { name: "missing model", path: C, body: { messages: user }, status: 400, says: "model" },
  {
    name: "model is a number",
    path: C,
    body: chat({ model: 7 }),
    status: 400,
    says: "model must be a string",
  },
  { name: "missing messages", path: C, body: { model: MODEL }, status: 400, says: "messages" },
  { name: "empty messages", path: C, body: chat({ messages: [] }), status: 400, says: "must not be empty" },
  {
    name: "messages is a string",
    path: C,
    body: chat({ messages: "hi" }),
    status: 400,
    says: "must be an array",
  },
  {
    name: "unknown role",
    path: C,
    body: chat({ messages: [{ role: "wizard", content: "hi" }] }),
    status: 400,
    says: "messages[0].role",
  },
  {
    name: "content is a number",
    path: C,
    body: chat({ messages: [{ role: "user", content: 5 }] }),
    status: 400,
    says: "messages[0].content",
  },
  {
    name: "user message without content",
    path: C,
    body: chat({ messages: [{ role: "user" }] }),
    status: 400,
    says: "is required",
  },
  {
    name: "image content part",
    path: C,
    body: chat({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }),
    status: 400,
    says: "text only",
  },
  { name: "max_tokens 0", path: C, body: chat({ max_tokens: 0 }), status: 400, says: "max_tokens" },
  {
    name: "max_tokens as a string",
    path: C,
    body: chat({ max_tokens: "10" }),
    status: 400,
    says: "max_tokens",
  },
  { name: "max_tokens fractional", path: C, body: chat({ max_tokens: 1.5 }), status: 400, says: "integer" },
  { name: "temperature 5", path: C, body: chat({ temperature: 5 }), status: 400, says: "temperature" },
  { name: "top_p negative", path: C, body: chat({ top_p: -1 }), status: 400, says: "top_p" },
  { name: "n = 2", path: C, body: chat({ n: 2 }), status: 400, says: "n = 2" },
  { name: "stream is a string", path: C, body: chat({ stream: "yes" }), status: 400, says: "stream" },
  { name: "stop holds a number", path: C, body: chat({ stop: ["a", 3] }), status: 400, says: "stop[1]" },
  { name: "tools is an object", path: C, body: chat({ tools: { a: 1 } }), status: 400, says: "tools" },
  {
    name: "tool schema is a string",
    path: C,
    body: chat({ tools: [fn("{}")] }),
    status: 400,
    says: "JSON Schema object",
  },
  {
    name: "tool schema of type array",
    path: C,
    body: chat({ tools: [fn({ type: "array" })] }),
    status: 400,
    says: '"object"',
  },
  {
    name: "tool without a name",
    path: C,
    body: chat({ tools: [{ type: "function", function: { parameters: {} } }] }),
    status: 400,
    says: "name",
  },
  {
    name: "tool_choice names a missing tool",
    path: C,
    body: chat({ tools: [fn({})], tool_choice: { type: "function", function: { name: "g" } } }),
    status: 400,
    says: "not in tools",
  },
  {
    name: "tool_calls without a function name",
    path: C,
    body: chat({
      messages: [{
        role: "assistant",
        content: null,
        tool_calls: [{ id: "1", type: "function", function: { arguments: "{}" } }],
      }, ...user],
    }),
    status: 400,
    says: "name",
  },
  {
    name: "a message that is null",
    path: C,
    body: chat({ messages: [null] }),
    status: 400,
    says: "messages[0] must be an object",
  },
  {
    name: "tool_choice required without tools",
    path: C,
    body: chat({ tool_choice: "required" }),
    status: 400,
    says: "needs tools",
  },
  {
    name: "presence_penalty out of range",
    path: C,
    body: chat({ presence_penalty: 3 }),
    status: 400,
    says: "presence_penalty",
  },
  {
    name: "response_format json_schema",
    path: C,
    body: chat({ response_format: { type: "json_schema" } }),
    status: 400,
    says: "response_format",
  },
  {
    name: "history over the window",
    path: C,
    body: chat({
      messages: [
        { role: "user", content: "word ".repeat(400) },
        { role: "assistant", content: "ok" },
        ...user,
      ],
    }),
    status: 400,
    code: "context_length_exceeded",
    says: "exceeds the context window",
  },
  {
    name: "last message alone over the window",
    path: C,
    body: chat({ messages: [{ role: "user", content: "word ".repeat(400) }] }),
    status: 400,
    code: "prompt_exceeds_window",
    says: "alone take",
  },
  // OpenAI completions
  {
    name: "completions without prompt",
    path: "/v1/completions",
    body: { model: MODEL },
    status: 400,
    says: "prompt",
  },
  {
    name: "completions with several prompts",
    path: "/v1/completions",
    body: { model: MODEL, prompt: ["a", "b"] },
    status: 400,
    says: "one request per prompt",
  },
  {
    name: "completions with token ids beyond the vocabulary",
    path: "/v1/completions",
    body: { model: MODEL, prompt: [1, 99999999] },
    status: 400,
    says: "token ids",
  },
  // Anthropic
  {
    name: "messages without max_tokens",
    path: M,
    body: { model: MODEL, messages: user },
    status: 400,
    code: "invalid_request_error",
    says: "max_tokens",
  },
  {
    name: "developer role in Anthropic messages",
    path: M,
    body: msgs({ messages: [{ role: "developer", content: "x" }] }),
    status: 400,
    says: "messages[0].role",
  },
  {
    name: "tool without input_schema",
    path: M,
    body: msgs({ tools: [{ name: "f" }] }),
    status: 400,
    says: "input_schema",
  },
  {
    name: "input_schema is a string",
    path: M,
    body: msgs({ tools: [{ name: "f", input_schema: "object" }] }),
    status: 400,
    says: "JSON Schema object",
  },
  {
    name: "image block",
    path: M,
    body: msgs({ messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }),
    status: 400,
    says: "not supported",
  },
  {
    name: "tool_result without tool_use_id",
    path: M,
    body: msgs({ messages: [{ role: "user", content: [{ type: "tool_result", content: "x" }] }] }),
    status: 400,
    says: "tool_use_id",
  },
  {
    name: "built-in server tool",
    path: M,
    body: msgs({ tools: [{ type: "web_search_20250305", name: "web_search" }] }),
    status: 400,
    says: "custom tool",
  },
  {
    name: "structured output format of an unknown type",
    path: M,
    body: msgs({ output_config: { format: { type: "xml" } } }),
    status: 400,
    says: "output_config.format.type",
  },
  {
    name: "prompt too long (Anthropic phrase)",
    path: M,
    body: msgs({ messages: [{ role: "user", content: "word ".repeat(400) }] }),
    status: 400,
    code: "invalid_request_error",
    says: "prompt is too long: ",
  },
  {
    name: "count_tokens with empty messages",
    path: "/v1/messages/count_tokens",
    body: { model: MODEL, messages: [] },
    status: 400,
    code: "invalid_request_error",
  },
  // Routing, auth, admin
  { name: "unknown route", path: "/v1/nothing", method: "GET", status: 404 },
  {
    name: "URL over 8 KiB",
    path: `/v1/models?q=${"a".repeat(9000)}`,
    method: "GET",
    status: 414,
    code: "uri_too_long",
    says: "at most 8192",
  },
  {
    name: "headers over 32 KiB (Anthropic)",
    path: M,
    body: msgs({}),
    headers: { "x-padding": "p".repeat(40_000) },
    status: 431,
    code: "request_too_large",
    says: "headers",
  },
  { name: "GET on a POST route", path: C, method: "GET", status: 404 },
  { name: "missing API key", path: C, body: chat({}), auth: false, status: 401, says: "missing API key" },
  {
    name: "wrong API key (x-api-key)",
    path: M,
    body: msgs({}),
    auth: false,
    headers: { "x-api-key": "nope" },
    status: 401,
    code: "authentication_error",
  },
  { name: "admin load without a model", path: "/admin/load", body: {}, status: 400, says: "model" },
  {
    name: "admin load of a folder outside the models dir",
    path: "/admin/load",
    body: { model: "../src" },
    status: 403,
    says: "outside",
  },
  {
    name: "admin load of a missing model",
    path: "/admin/load",
    body: { model: "no-such-model" },
    status: 404,
  },
  {
    name: "admin load with a bad context_window",
    path: "/admin/load",
    body: { model: MODEL, context_window: "big" },
    status: 400,
    says: "context_window",
  },
];
