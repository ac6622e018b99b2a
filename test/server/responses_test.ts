/**
 * POST /v1/responses through the official openai SDK, as Codex speaks it: plain and streamed responses
 * (the stream assembles to the non-streamed one), instructions and developer/user/assistant input items
 * with input_text parts, a tool round trip (function_call out, function_call_output back in), namespace
 * tools flattened, freeform (custom) tools, hosted tools ignored with a note, store false.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type RunningServer, sseEvents, startServer } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
let server: RunningServer;
let client: OpenAI;

beforeAll(async () => {
  server = await startServer(["--context-window", "1024", "--max-batch", "2"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
});
afterAll(async () => {
  await server?.stop();
});

const SHELL = {
  type: "function" as const,
  name: "shell",
  description: "Runs a command",
  parameters: {
    type: "object",
    properties: { command: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 3 } },
    required: ["command"],
    additionalProperties: false,
  },
  strict: false,
};

describe("Responses API", () => {
  test("a plain response, and the same one streamed", async () => {
    const body = {
      model: "gpt-5-codex",
      instructions: "You write Python.",
      input: [
        { role: "developer" as const, content: "Answer with code." },
        { role: "user" as const, content: [{ type: "input_text" as const, text: "def add(a, b):" }] },
      ],
      max_output_tokens: 16,
      temperature: 0,
      store: false,
    };
    const r = await client.responses.create(body);
    expect(r.object).toBe("response");
    expect(r.model).toBe(MODEL);
    expect(["completed", "incomplete"]).toContain(r.status);
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBeLessThanOrEqual(16);
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens);
    expect((r as unknown as { store: boolean }).store).toBe(false);

    const types: string[] = [];
    let deltas = "";
    const stream = client.responses.stream(body);
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === "response.output_text.delta") deltas += e.delta;
    }
    const final = await stream.finalResponse();
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_item.added");
    expect(types).toContain("response.output_item.done");
    expect(["response.completed", "response.incomplete"]).toContain(types.at(-1));
    expect(deltas).toBe(r.output_text);
    expect(final.output_text).toBe(r.output_text);
    // The same prompt again: its full pages come from the prefix cache, the counts are the same.
    expect(final.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    expect({ ...final.usage, input_tokens_details: null }).toEqual({
      ...r.usage,
      input_tokens_details: null,
    });
  });

  test("a tool round trip: a forced function_call, then its output back as input", async () => {
    const first = await client.responses.create({
      model: MODEL,
      input: "List the files.",
      tools: [SHELL, { type: "web_search" as const }],
      tool_choice: "required",
      max_output_tokens: 60,
      temperature: 0,
    });
    const call = first.output.find((o) =>
      o.type === "function_call"
    ) as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.name).toBe("shell");
    expect(Array.isArray(JSON.parse(call.arguments).command)).toBe(true);
    expect(call.call_id).toMatch(/^call_/);

    const deltas: string[] = [];
    let done = "";
    const stream = client.responses.stream({
      model: MODEL,
      input: [
        { role: "user", content: "List the files." },
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.call_id, output: "a.py\nb.py" },
        { role: "user", content: "Now open a.py." },
      ],
      tools: [SHELL],
      tool_choice: { type: "function", name: "shell" },
      max_output_tokens: 60,
      temperature: 0,
    });
    for await (const e of stream) {
      if (e.type === "response.function_call_arguments.delta") deltas.push(e.delta);
      if (e.type === "response.function_call_arguments.done") done = e.arguments;
    }
    const second = await stream.finalResponse();
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe(done);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    const again = second.output.find((o) =>
      o.type === "function_call"
    ) as OpenAI.Responses.ResponseFunctionToolCall;
    expect(again.arguments).toBe(done);
  });

  test(
    "namespace tools are flattened; a freeform tool's call comes back as custom_tool_call " +
      "input",
    async () => {
      const r = await client.responses.create({
        model: MODEL,
        input: "Patch it.",
        tools: [
          { type: "namespace", name: "fs", tools: [SHELL] } as any,
          {
            type: "custom",
            name: "apply_patch",
            description: "Applies a patch",
            format: { type: "text" },
          } as any,
        ],
        tool_choice: { type: "custom", name: "apply_patch" } as any,
        max_output_tokens: 40,
        temperature: 0,
      });
      const item = r.output.find((o) => o.type === "custom_tool_call") as any;
      expect(item.name).toBe("apply_patch");
      expect(typeof item.input).toBe("string");
      const named = await client.responses.create({
        model: MODEL,
        input: "Run ls.",
        tools: [{ type: "namespace", name: "fs", tools: [SHELL] } as any],
        tool_choice: { type: "function", name: "fs.shell" },
        max_output_tokens: 40,
        temperature: 0,
      });
      expect((named.output.find((o) => o.type === "function_call") as any).name).toBe("fs.shell");
    },
  );

  test("hosted tools are ignored with a note; previous_response_id is refused", async () => {
    const res = await fetch(`${server.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        input: "hi",
        tools: [{ type: "web_search" }],
        max_output_tokens: 2,
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("flint-note")).toContain("web_search");
    const events = [];
    for await (const e of sseEvents(res)) events.push(e.event);
    expect(events[0]).toBe("response.created");
    const e = await client.responses.create({ model: MODEL, input: "hi", previous_response_id: "resp_1" })
      .catch((x) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e.param).toBe("previous_response_id");
  });
});
