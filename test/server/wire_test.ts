/**
 * The streaming path for tool calls, at the unit level with synthetic model text (the bundled 19M model
 * does not write valid calls): text → ToolCallParser (in random chunks) → the stream encoders → the
 * official SDKs' own stream accumulators, which must assemble exactly the non-streamed response.
 */
import { MessageStream } from "@anthropic-ai/sdk/lib/MessageStream";
import { ChatCompletionStream } from "openai/lib/ChatCompletionStream";
import { describe, expect, test } from "vitest";
import { messageBody, MessageEvents } from "../../src/server/anthropic_wire.ts";
import { ChatChunker, chatCompletion, type Finish } from "../../src/server/openai_wire.ts";
import { ToolCallParser, type ToolPiece } from "../../src/server/tools.ts";

function parse(text: string, chunk: number): { streamed: ToolPiece[][]; all: ToolPiece[] } {
  const p = new ToolCallParser();
  const streamed: ToolPiece[][] = [];
  for (let i = 0; i < text.length; i += chunk) streamed.push(p.push(text.slice(i, i + chunk)));
  streamed.push(p.flush());
  return { streamed, all: streamed.flat() };
}

function ndjson(objects: unknown[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const o of objects) c.enqueue(enc.encode(JSON.stringify(o) + "\n"));
      c.close();
    },
  });
}

const counter = (prefix: string) => {
  let n = 0;
  return () => `${prefix}${n++}`;
};

const SAMPLES: { name: string; text: string; finish: Finish }[] = [
  {
    name: "text, then two calls",
    text: 'I will look both up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n' +
      "</tool_call>\n" +
      '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris", "fmt": {"h24": true}}}\n' +
      "</tool_call>",
    finish: { finishReason: "stop", promptTokens: 40, completionTokens: 51, stopSequence: null },
  },
  {
    name: "a call only",
    text: '<tool_call>{"name": "ls", "arguments": {}}</tool_call>',
    finish: { finishReason: "stop", promptTokens: 12, completionTokens: 14, stopSequence: null },
  },
  {
    name: "a malformed call stays text",
    text: 'Here:\n<tool_call>\n{"name": "ls", "arguments": {oops}}\n</tool_call>',
    finish: { finishReason: "stop", promptTokens: 12, completionTokens: 20, stopSequence: null },
  },
  {
    name: "text cut by the length limit inside a call",
    text: 'Sure <tool_call>\n{"name": "ls", "argu',
    finish: { finishReason: "length", promptTokens: 12, completionTokens: 9, stopSequence: null },
  },
];

describe(
  "OpenAI chunks assemble (in openai-node's ChatCompletionStream) to the non-streamed " +
    "completion",
  () => {
    for (const s of SAMPLES) {
      for (const chunk of [1, 3, 17]) {
        test(`${s.name}, ${chunk}-char chunks`, async () => {
          const { streamed, all } = parse(s.text, chunk);
          const meta = { id: "chatcmpl-x", created: 1, model: "m", includeUsage: true };
          const whole = chatCompletion({ ...meta, callId: counter("call_") }, all, s.finish) as any;
          const chunker = new ChatChunker({ ...meta, callId: counter("call_") });
          const objects = [
            ...chunker.start(),
            ...streamed.flat().flatMap((p) => chunker.piece(p)),
            ...chunker.end(s.finish),
          ];
          const final = await ChatCompletionStream.fromReadableStream(ndjson(objects)).finalChatCompletion();
          const want = whole.choices[0];
          const got = final.choices[0];
          expect(got.finish_reason).toBe(want.finish_reason);
          // The stream opens with content "" before it knows whether calls follow; null and "" are both "no
          // text".
          expect(got.message.content || null).toEqual(want.message.content || null);
          expect(got.message.tool_calls ?? []).toEqual(want.message.tool_calls ?? []);
          expect(final.usage).toEqual(whole.usage);
        });
      }
    }

    test("tool calls come out as tool_calls with JSON arguments, text around them as content", () => {
      const { all } = parse(SAMPLES[0].text, 5);
      const whole = chatCompletion(
        { id: "c", created: 1, model: "m", includeUsage: false, callId: counter("call_") },
        all,
        SAMPLES[0].finish,
      ) as any;
      expect(whole.choices[0].message.content).toBe("I will look both up.");
      expect(whole.choices[0].finish_reason).toBe("tool_calls");
      expect(
        whole.choices[0].message.tool_calls.map((
          c: any,
        ) => [c.function.name, JSON.parse(c.function.arguments)]),
      ).toEqual([
        ["get_weather", { city: "Paris" }],
        ["get_time", { tz: "Europe/Paris", fmt: { h24: true } }],
      ]);
    });
  },
);

describe("Anthropic events assemble (in the SDK's MessageStream) to the non-streamed message", () => {
  for (const s of SAMPLES) {
    for (const chunk of [1, 3, 17]) {
      test(`${s.name}, ${chunk}-char chunks`, async () => {
        const { streamed, all } = parse(s.text, chunk);
        const whole = messageBody(
          { id: "msg_x", model: "m", callId: counter("toolu_") },
          all,
          s.finish,
        ) as any;
        const ev = new MessageEvents({ id: "msg_x", model: "m", callId: counter("toolu_") });
        const events = [
          ...ev.start(s.finish.promptTokens),
          ...streamed.flat().flatMap((p) => ev.piece(p)),
          ...ev.end(s.finish),
        ];
        const types = events.map(([e]) => e);
        expect(types[0]).toBe("message_start");
        expect(types.slice(-2)).toEqual(["message_delta", "message_stop"]);
        const final = await MessageStream.fromReadableStream(ndjson(events.map(([, d]) => d))).finalMessage();
        expect(final.content).toEqual(whole.content);
        expect(final.stop_reason).toBe(whole.stop_reason);
        expect(final.usage.output_tokens).toBe(s.finish.completionTokens);
        expect(final.usage.input_tokens).toBe(s.finish.promptTokens);
      });
    }
  }

  test("stop reasons: tool_use, max_tokens, stop_sequence, end_turn", () => {
    const meta = { id: "m", model: "m", callId: counter("t") };
    const r = (
      f: Partial<Finish>,
      text: string,
    ) => (messageBody(meta, parse(text, 4).all, {
      finishReason: "stop",
      promptTokens: 1,
      completionTokens: 1,
      stopSequence: null,
      ...f,
    }) as any);
    expect(r({}, SAMPLES[1].text).stop_reason).toBe("tool_use");
    expect(r({ finishReason: "length" }, "abc").stop_reason).toBe("max_tokens");
    expect(r({ stopSequence: "##" }, "abc")).toMatchObject({
      stop_reason: "stop_sequence",
      stop_sequence: "##",
    });
    expect(r({}, "abc").stop_reason).toBe("end_turn");
  });
});
