/**
 * Conversations through the bundled model's real chat template (a plain ChatML that ignores `tools`): the
 * server must notice and write the Hermes tool convention itself.
 */
import { beforeAll, describe, expect, test } from "vitest";
import { Tokenizer } from "../../src/loader/tokenizer.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { renderChat, templateCaps, type ToolDef, type Turn } from "../../src/server/prompt.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";

let tok: Tokenizer;
beforeAll(async () => {
  tok = await Tokenizer.load(new DiskModelSource(DEFAULT_MODEL));
});

const weather: ToolDef = {
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const history: Turn[] = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Weather in Paris?" },
  {
    role: "assistant",
    content: "",
    toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
  },
  { role: "tool", toolCallId: "call_1", content: '{"temp": 21}' },
  { role: "tool", toolCallId: "call_2", content: '{"temp": 22}' },
];

describe("chat prompts", () => {
  test("the bundled template does not render tools, so the Hermes fallback is used", () => {
    expect(templateCaps(tok).tools).toBe(false);
  });

  test("tools, calls and results are all in the prompt, in the Hermes convention", () => {
    const r = renderChat(tok, { turns: history, tools: [weather], toolChoice: "auto" });
    const text = tok.decode(r.ids, false);
    expect(text).toBe(
      "<|im_start|>system\nYou are terse.\n\n# Tools\n\n" +
        "You may call one or more functions to assist with the user query.\n\n" +
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
        JSON.stringify({
          type: "function",
          function: { name: "get_weather", description: weather.description, parameters: weather.parameters },
        }) +
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
        "within <tool_call></tool_call> XML tags:\n" +
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
        '<|im_start|>assistant\n<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n' +
        "</tool_call><|im_end|>\n" +
        '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response>\n<tool_response>\n' +
        '{"temp": 22}\n</tool_response><|im_end|>\n' +
        "<|im_start|>assistant\n",
    );
    expect(r.parseTools).toBe(true);
    expect(r.forced).toBe("");
  });

  test(
    "tool_choice none: no tool prompt and no parsing; " +
      "a named choice starts the call for the model",
    () => {
      const none = renderChat(tok, { turns: history.slice(0, 2), tools: [weather], toolChoice: "none" });
      expect(tok.decode(none.ids, false)).not.toContain("# Tools");
      expect(none.parseTools).toBe(false);
      const named = renderChat(tok, {
        turns: history.slice(0, 2),
        tools: [weather],
        toolChoice: { name: "get_weather" },
      });
      expect(named.forced).toBe('<tool_call>\n{"name": "get_weather", "arguments": ');
      expect(tok.decode(named.ids, false).endsWith("<|im_start|>assistant\n" + named.forced)).toBe(true);
    },
  );

  test("no tools: the template's own rendering, untouched", () => {
    const r = renderChat(tok, { turns: [{ role: "user", content: "hi" }], tools: [], toolChoice: "auto" });
    expect(tok.decode(r.ids, false)).toBe(tok.applyChatTemplate([{ role: "user", content: "hi" }]));
    expect(r.parseTools).toBe(false);
  });
});
