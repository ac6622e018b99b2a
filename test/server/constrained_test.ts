/**
 * Forced tool calls and structured output through the real server: with tool_choice required / named
 * (OpenAI), any / tool (Anthropic), `required` in the Responses API, and response_format json_object /
 * json_schema, decoding is constrained so the reply *is* a call whose arguments validate against the tool's
 * schema (or JSON of the schema). Checked on the bundled model (greedy and sampled, streamed arguments
 * arriving as deltas) and on every architecture fixture, whose random weights would never write a call
 * unaided.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { chatFixture } from "../util/chat_fixture.ts";
import { type RunningServer, startServer } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
const WEATHER = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 12 },
    unit: { type: "string", enum: ["C", "F"] },
    days: { type: "integer" },
  },
  required: ["city", "unit"],
  additionalProperties: false,
};
const SEARCH = {
  type: "object",
  properties: { query: { type: "string", maxLength: 10 }, exact: { type: "boolean" } },
  required: ["query"],
};
const TOOLS = [
  {
    type: "function" as const,
    function: { name: "get_weather", description: "Weather for a city", parameters: WEATHER },
  },
  {
    type: "function" as const,
    function: { name: "search", description: "Search the code", parameters: SEARCH },
  },
];
const SCHEMAS: Record<string, unknown> = { get_weather: WEATHER, search: SEARCH };

/** The test's own check of the schema subset used here (independent of the grammar compiler). */
function validate(schema: any, v: unknown, path = "$"): string[] {
  const errs: string[] = [];
  const type = schema.type;
  const is = (t: string) =>
    t === "object"
      ? v !== null && typeof v === "object" && !Array.isArray(v)
      : t === "array"
      ? Array.isArray(v)
      : t === "integer"
      ? Number.isInteger(v)
      : t === "null"
      ? v === null
      : (typeof v as string) === t;
  if (type && !is(type)) return [`${path}: not ${type}`];
  if (schema.enum && !schema.enum.includes(v)) errs.push(`${path}: not in enum`);
  if (typeof v === "string" && schema.maxLength !== undefined && [...v].length > schema.maxLength) {
    errs.push(`${path}: longer than ${schema.maxLength}`);
  }
  if (type === "object") {
    const o = v as Record<string, unknown>;
    for (const k of schema.required ?? []) if (!(k in o)) errs.push(`${path}.${k}: missing`);
    for (const [k, x] of Object.entries(o)) {
      const sub = schema.properties?.[k];
      if (!sub && schema.additionalProperties === false) errs.push(`${path}.${k}: not allowed`);
      if (sub) errs.push(...validate(sub, x, `${path}.${k}`));
    }
  }
  if (type === "array") {
    (v as unknown[]).forEach((x, i) => errs.push(...validate(schema.items ?? {}, x, `${path}[${i}]`)));
  }
  return errs;
}

function expectValidCall(name: string, args: string): void {
  expect(Object.keys(SCHEMAS)).toContain(name);
  expect(validate(SCHEMAS[name], JSON.parse(args)), args).toEqual([]);
}

let server: RunningServer;
let openai: OpenAI;
let anthropic: Anthropic;
const fixturesDir = Deno.makeTempDirSync({ prefix: "flint-chat-fixtures-" });
const FIXTURE_NAMES = ["llama", "llama3-rope-scaled", "qwen2", "qwen3", "qwen3-mlx-4bit"];

beforeAll(async () => {
  for (const f of FIXTURE_NAMES) await chatFixture(fixturesDir, f);
  server = await startServer(["--context-window", "1024", "--max-batch", "4", "--models-dir", fixturesDir]);
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "x", maxRetries: 0 });
});
afterAll(async () => {
  await server?.stop();
  await Deno.remove(fixturesDir, { recursive: true });
});

const ask = [{ role: "user" as const, content: "What is the weather in Paris?" }];

describe("bundled model", () => {
  test("OpenAI tool_choice required, greedy and sampled: a schema-valid call", async () => {
    for (const temperature of [0, 1]) {
      const r = await openai.chat.completions.create({
        model: MODEL,
        messages: ask,
        tools: TOOLS,
        tool_choice: "required",
        max_tokens: 80,
        temperature,
        seed: 7,
      });
      const c = r.choices[0];
      expect(c.finish_reason).toBe("tool_calls");
      expect(c.message.tool_calls).toHaveLength(1);
      const call = c.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expectValidCall(call.function.name, call.function.arguments);
    }
  });

  test(
    "OpenAI named tool, streamed: the arguments arrive in several deltas and match the whole " +
      "reply",
    async () => {
      const body = {
        model: MODEL,
        messages: ask,
        tools: TOOLS,
        max_tokens: 60,
        temperature: 0,
        tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      };
      const whole = await openai.chat.completions.create(body);
      const call = whole.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).toBe("get_weather");
      expectValidCall("get_weather", call.function.arguments);
      const deltas: string[] = [];
      for await (const chunk of await openai.chat.completions.create({ ...body, stream: true })) {
        const d = chunk.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments;
        if (d) deltas.push(d);
      }
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.join("")).toBe(call.function.arguments);
    },
  );

  test("Anthropic tool_choice any and tool: a tool_use block with valid input", async () => {
    const tools = TOOLS.map((t) => ({
      name: t.function.name,
      description: t.function.description,
      input_schema: t.function.parameters as any,
    }));
    for (const tool_choice of [{ type: "any" as const }, { type: "tool" as const, name: "search" }]) {
      const r = await anthropic.messages.create({
        model: MODEL,
        max_tokens: 80,
        messages: ask,
        tools,
        tool_choice,
        ...({ temperature: 0 } as object),
      });
      expect(r.stop_reason).toBe("tool_use");
      const use = r.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
      if (tool_choice.type === "tool") expect(use.name).toBe("search");
      expectValidCall(use.name, JSON.stringify(use.input));
    }
  });

  test("Responses API tool_choice required: a function_call item", async () => {
    const r = await openai.responses.create({
      model: MODEL,
      input: "Weather in Oslo?",
      tools: TOOLS.map((t) => ({
        type: "function" as const,
        name: t.function.name,
        parameters: t.function.parameters,
        strict: false,
      })),
      tool_choice: "required",
      max_output_tokens: 80,
      temperature: 0,
    });
    const call = r.output.find((o) =>
      o.type === "function_call"
    ) as OpenAI.Responses.ResponseFunctionToolCall;
    expectValidCall(call.name, call.arguments);
  });

  test("response_format json_schema and json_object: the content parses (and validates)", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 8 },
        tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
      },
      required: ["name", "tags"],
      additionalProperties: false,
    };
    const r = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Describe a package as JSON." }],
      max_tokens: 80,
      temperature: 0,
      response_format: { type: "json_schema", json_schema: { name: "pkg", schema } },
    });
    expect(r.choices[0].finish_reason).toBe("stop");
    expect(validate(schema, JSON.parse(r.choices[0].message.content!))).toEqual([]);
    const o = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Answer in JSON." }],
      max_tokens: 60,
      temperature: 1,
      seed: 3,
      response_format: { type: "json_object" },
    });
    const v = JSON.parse(o.choices[0].message.content!);
    expect(v !== null && typeof v === "object" && !Array.isArray(v)).toBe(true);
  });
});

describe("every architecture fixture (random weights)", () => {
  for (const name of FIXTURE_NAMES) {
    test(`${name}: forced calls (OpenAI required, Anthropic tool) are valid`, async () => {
      const load = await fetch(`${server.url}/admin/load`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: name, context_window: 1024 }),
      });
      expect(load.status, await load.clone().text()).toBe(200);
      const r = await openai.chat.completions.create({
        model: name,
        messages: ask,
        tools: TOOLS,
        tool_choice: "required",
        max_tokens: 120,
        temperature: 0,
      });
      const call = r.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expectValidCall(call.function.name, call.function.arguments);
      const tools = TOOLS.map((t) => ({ name: t.function.name, input_schema: t.function.parameters as any }));
      const a = await anthropic.messages.create({
        model: name,
        max_tokens: 60,
        messages: ask,
        tools,
        tool_choice: { type: "tool", name: "get_weather" },
        ...({ temperature: 1 } as object),
      });
      const use = a.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
      expect(use.name).toBe("get_weather");
      expectValidCall("get_weather", JSON.stringify(use.input));
    });
  }
});
