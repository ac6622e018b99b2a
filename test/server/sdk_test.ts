/**
 * The official `openai` and `@anthropic-ai/sdk` clients against the running server (real HTTP on
 * 127.0.0.1, API key on): chat, streaming equal to non-streaming, tool-call round trips through the chat
 * template, count_tokens, and errors surfacing as the SDKs' typed errors.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Tokenizer } from "../../src/loader/tokenizer.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { renderChat } from "../../src/server/prompt.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";
import { type RunningServer, startServer } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
const KEY = "test-key-123";
const CTX = 512;
let server: RunningServer;
let openai: OpenAI;
let anthropic: Anthropic;
let tok: Tokenizer;

beforeAll(async () => {
  server = await startServer(["--context-window", String(CTX), "--max-batch", "4", "--api-key", KEY]);
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
  tok = await Tokenizer.load(new DiskModelSource(DEFAULT_MODEL));
});
afterAll(async () => {
  await server?.stop();
});

const weatherTool = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

describe("openai SDK", () => {
  const messages = [{ role: "user" as const, content: "Write a python function that adds two numbers." }];

  test("chat: streaming gives the same text and usage as non-streaming", async () => {
    const full = await openai.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      temperature: 0,
    });
    expect(full.object).toBe("chat.completion");
    expect(full.choices[0].finish_reason).toBe("length");
    expect(full.usage!.completion_tokens).toBe(12);
    expect(full.usage!.prompt_tokens).toBe(tok.encode(tok.applyChatTemplate(messages)).length);
    expect(full.choices[0].message.content!.length).toBeGreaterThan(0);

    const stream = await openai.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        text += ch.delta.content ?? "";
        finish = ch.finish_reason ?? finish;
      }
    }
    expect(text).toBe(full.choices[0].message.content);
    expect(finish).toBe("length");
    // The same prompt again: its full pages come from the prefix cache, the counts are the same.
    const { prompt_tokens_details: cached, ...counts } = usage!;
    expect(counts).toEqual({ ...full.usage, prompt_tokens_details: undefined });
    expect(cached!.cached_tokens).toBeGreaterThan(0);
  });

  test("stop sequences end the text before the stop string", async () => {
    const full = await openai.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      temperature: 0,
    });
    const text = full.choices[0].message.content!;
    const stop = text.slice(4, 7);
    const cut = await openai.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      temperature: 0,
      stop: [stop],
    });
    expect(cut.choices[0].message.content).toBe(text.slice(0, text.indexOf(stop)));
    expect(cut.choices[0].finish_reason).toBe("stop");
  });

  test("tool round trip: assistant tool_calls and tool results go through the template", async () => {
    const history: OpenAI.ChatCompletionMessageParam[] = [
      { role: "user", content: "What is the weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{
          id: "call_1",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Paris"}' },
        }],
      },
      { role: "tool", tool_call_id: "call_1", content: '{"temp_c": 21}' },
    ];
    const r = await openai.chat.completions.create({
      model: MODEL,
      messages: history,
      tools: [weatherTool],
      max_tokens: 8,
      temperature: 0,
    });
    const expected = renderChat(tok, {
      turns: [
        { role: "user", content: "What is the weather in Paris?" },
        {
          role: "assistant",
          content: "",
          toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
        },
        { role: "tool", toolCallId: "call_1", content: '{"temp_c": 21}' },
      ],
      tools: [{
        name: "get_weather",
        description: weatherTool.function.description,
        parameters: weatherTool.function.parameters,
      }],
      toolChoice: "auto",
    });
    const prompt = tok.decode(expected.ids, false);
    expect(prompt).toContain(
      '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n</tool_call>',
    );
    expect(prompt).toContain('<tool_response>\n{"temp_c": 21}\n</tool_response>');
    expect(r.usage!.prompt_tokens).toBe(expected.ids.length);
    expect(["stop", "length", "tool_calls"]).toContain(r.choices[0].finish_reason);
  });

  test(
    "forced tool_choice: the streamed tool_calls deltas assemble to the non-streamed " +
      "message",
    async () => {
      const req = {
        model: MODEL,
        max_tokens: 40,
        temperature: 0,
        tools: [weatherTool],
        tool_choice: { type: "function" as const, function: { name: "get_weather" } },
        messages: [{ role: "user" as const, content: "Weather in Paris?" }],
      };
      const full = await openai.chat.completions.create(req);
      const msg = full.choices[0].message;
      const streamed = await openai.chat.completions.create({ ...req, stream: true });
      let content = "";
      const calls: { name: string; arguments: string }[] = [];
      for await (const chunk of streamed) {
        const d = chunk.choices[0]?.delta;
        content += d?.content ?? "";
        for (const tc of d?.tool_calls ?? []) {
          calls[tc.index] ??= { name: "", arguments: "" };
          calls[tc.index].name += tc.function?.name ?? "";
          calls[tc.index].arguments += tc.function?.arguments ?? "";
        }
      }
      expect(content).toBe(msg.content ?? "");
      expect(calls).toEqual(
        (msg.tool_calls ?? []).map((c: any) => ({ name: c.function.name, arguments: c.function.arguments })),
      );
      // Constrained decoding: the reply is the call, with object arguments, never raw text.
      expect(full.choices[0].finish_reason).toBe("tool_calls");
      expect(msg.content).toBeNull();
      expect((msg.tool_calls![0] as any).function.name).toBe("get_weather");
      const args = JSON.parse((msg.tool_calls![0] as any).function.arguments);
      expect(typeof args === "object" && !Array.isArray(args)).toBe(true);
    },
  );

  test("completions and models", async () => {
    const c = await openai.completions.create({
      model: MODEL,
      prompt: "def add(a, b):",
      max_tokens: 6,
      temperature: 0,
    });
    expect(c.object).toBe("text_completion");
    expect(c.usage).toEqual({
      prompt_tokens: tok.encode("def add(a, b):").length,
      completion_tokens: 6,
      total_tokens: tok.encode("def add(a, b):").length + 6,
      // Shorter than a KV page: nothing to cache.
      prompt_tokens_details: { cached_tokens: 0 },
    });
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  });

  test("errors are the SDK's typed errors", async () => {
    const long = "word ".repeat(600);
    const e1 = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: long }],
      max_tokens: 8,
    }).catch((e) => e);
    expect(e1).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e1.code).toBe("prompt_exceeds_window"); // compacting history cannot help: one message
    const e0 = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: long }, { role: "assistant", content: "ok" }, ...messages],
      max_tokens: 8,
    }).catch((e) => e);
    expect(e0).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e0.code).toBe("context_length_exceeded");
    expect(e0.message).toMatch(/exceeds the context window/);
    // Any model name is answered by the one served model, under its own name (as llama-server does).
    const other = await openai.chat.completions.create({ model: "gpt-nope", messages, max_tokens: 4 });
    expect(other.model).toBe(MODEL);
    expect((await openai.models.retrieve(MODEL)).id).toBe(MODEL);
    const e3 = await openai.chat.completions.create({ model: MODEL, messages, n: 2 }).catch((e) => e);
    expect(e3).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e3.param).toBe("n");
    const bad = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    expect(await bad.models.list().catch((e) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});

/** This SDK version no longer types `temperature`; the server still reads it (older clients send it). */
const greedy = <T extends object>(p: T): T => ({ ...p, temperature: 0 });

describe("anthropic SDK", () => {
  const messages: Anthropic.MessageParam[] = [{
    role: "user",
    content: "Write a python function that adds two numbers.",
  }];

  test(
    "messages: streaming gives the same content and usage as non-streaming; " +
      "count_tokens agrees",
    async () => {
      const full = await anthropic.messages.create(
        greedy({ model: MODEL, max_tokens: 12, messages, system: "You write code." }),
      );
      expect(full.type).toBe("message");
      expect(full.stop_reason).toBe("max_tokens");
      expect(full.usage.output_tokens).toBe(12);
      const counted = await anthropic.messages.countTokens({
        model: MODEL,
        messages,
        system: "You write code.",
      });
      // Anthropic's input_tokens leaves out what was read from the cache.
      const prompt = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
      expect(counted.input_tokens).toBe(prompt(full.usage));

      const events: string[] = [];
      const stream = anthropic.messages.stream(
        greedy({ model: MODEL, max_tokens: 12, messages, system: "You write code." }),
      );
      stream.on("streamEvent", (e) => events.push(e.type));
      const final = await stream.finalMessage();
      expect(final.content).toEqual(full.content);
      expect(final.stop_reason).toBe("max_tokens");
      expect(prompt(final.usage)).toBe(prompt(full.usage));
      expect(final.usage.cache_read_input_tokens).toBeGreaterThan(0);
      expect(final.usage.output_tokens).toBe(full.usage.output_tokens);
      expect(events[0]).toBe("message_start");
      expect(events.slice(-2)).toEqual(["message_delta", "message_stop"]);
      expect(events).toContain("content_block_start");
      expect(events).toContain("content_block_delta");
      expect(events).toContain("content_block_stop");
    },
  );

  test("tool round trip: tool_use and tool_result blocks go through the template", async () => {
    const tools: Anthropic.Tool[] = [{
      name: "get_weather",
      description: "Current weather",
      input_schema: { type: "object", properties: { city: { type: "string" } } },
    }];
    const history: Anthropic.MessageParam[] = [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: [{ type: "text", text: "Checking." }, {
          type: "tool_use",
          id: "toolu_1",
          name: "get_weather",
          input: { city: "Paris" },
        }],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "21 C and sunny" }] },
    ];
    const r = await anthropic.messages.create(
      greedy({ model: MODEL, max_tokens: 8, messages: history, tools }),
    );
    const counted = await anthropic.messages.countTokens({ model: MODEL, messages: history, tools });
    const prompt = r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0);
    expect(prompt).toBe(counted.input_tokens);
    const expected = renderChat(tok, {
      turns: [
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: "Checking.",
          toolCalls: [{ id: "toolu_1", name: "get_weather", arguments: { city: "Paris" } }],
        },
        { role: "tool", toolCallId: "toolu_1", content: "21 C and sunny" },
      ],
      tools: [{
        name: "get_weather",
        description: "Current weather",
        parameters: tools[0].input_schema as any,
      }],
      toolChoice: "auto",
    });
    expect(tok.decode(expected.ids, false)).toContain("<tool_response>\n21 C and sunny\n</tool_response>");
    expect(prompt).toBe(expected.ids.length);
    expect(["end_turn", "max_tokens", "tool_use", "stop_sequence"]).toContain(r.stop_reason);
  });

  test(
    "errors are the SDK's typed errors; too long a prompt says so in the phrase clients look " +
      "for",
    async () => {
      const long = "word ".repeat(600);
      const e1 = await anthropic.messages.create({
        model: MODEL,
        max_tokens: 8,
        messages: [{ role: "user", content: long }],
      }).catch((e) => e);
      expect(e1).toBeInstanceOf(Anthropic.BadRequestError);
      expect(e1.error.error.type).toBe("invalid_request_error");
      const m = /prompt is too long: (\d+) tokens > (\d+) maximum/.exec(e1.message);
      expect(m).not.toBeNull();
      const counted = await anthropic.messages.countTokens({
        model: MODEL,
        messages: [{ role: "user", content: long }],
      });
      // Only the prompt counts: it must leave one token of the window for the reply.
      expect(Number(m![1])).toBe(counted.input_tokens);
      expect(Number(m![2])).toBe(CTX - 1);
      const other = await anthropic.messages.create({ model: "claude-nope", max_tokens: 4, messages });
      expect(other.model).toBe(MODEL);
      const bad = new Anthropic({ baseURL: server.url, apiKey: "wrong", maxRetries: 0 });
      expect(await bad.messages.create({ model: MODEL, max_tokens: 4, messages }).catch((e) => e))
        .toBeInstanceOf(Anthropic.AuthenticationError);
    },
  );
});
