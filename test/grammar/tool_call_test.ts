/**
 * Forced tool calls: the output after the exact prompt prefix parses with tools.ts to one call of a
 * listed tool with schema-valid arguments, for tool_choice required and named; the prefixes are the ones
 * prompt.ts puts at the end of the prompt; agents' real tool schemas compile within the state limit.
 */
import { describe, expect, test } from "vitest";
import { ValidationError } from "../../src/errors.ts";
import type { ByteDfa } from "../../src/grammar/dfa.ts";
import {
  CALL_PREFIX,
  CALL_SUFFIX,
  callHead,
  compileToolCall,
  namedCallPrefix,
  type ToolSpec,
} from "../../src/grammar/tool_call.ts";
import { accepts } from "../../src/grammar/walk.ts";
import { forcedPrefix, type ToolDef } from "../../src/server/prompt.ts";
import { CALL_CLOSE, CALL_OPEN, parseCallBody } from "../../src/server/tools.ts";
import { AGENT_TOOLS, BASH, EDIT, SHELL, TODO_WRITE } from "./agent_tools.ts";
import { decodeStrict, dfaProblems, randomWalk, Rng } from "./dfa_util.ts";
import { instance, validate } from "./json_model.ts";
import { serialize } from "./json_text.ts";

const WEATHER: ToolSpec = {
  name: "get_weather",
  parameters: {
    type: "object",
    properties: {
      city: { type: "string" },
      unit: { type: "string", enum: ["C", "F"] },
      days: { type: "integer" },
    },
    required: ["city"],
  },
};
const LIST_FILES: ToolSpec = {
  name: "list_files",
  parameters: { type: "object", properties: { path: { type: "string" }, all: { type: "boolean" } } },
};

/** The call the server would parse from prompt prefix + output: null when it would not parse. */
function parsedCall(prefix: string, output: string) {
  const full = prefix + output;
  if (!full.startsWith(CALL_OPEN) || !full.endsWith(CALL_CLOSE)) return null;
  return parseCallBody(full.slice(CALL_OPEN.length, full.length - CALL_CLOSE.length));
}

/** Random walks: each output, after its prefix, is one call of a listed tool with valid arguments. */
function walkCalls(dfa: ByteDfa, tools: ToolSpec[], prefix: string, rng: Rng, n: number) {
  const seen = new Set<string>();
  for (let i = 0; i < n; i++) {
    const output = decodeStrict(randomWalk(dfa, rng, 80));
    const full = prefix + output;
    expect(full.startsWith(CALL_OPEN) && full.endsWith(CALL_CLOSE), output).toBe(true);
    const body = full.slice(CALL_OPEN.length, full.length - CALL_CLOSE.length);
    const call = parseCallBody(body);
    expect(call, output).not.toBeNull();
    const tool = tools.find((t) => t.name === call!.name);
    expect(tool, output).toBeDefined();
    // The arguments as written: parseCallBody's re-serialized copy turns a number past double range to null.
    expect(validate(tool!.parameters, JSON.parse(body).arguments), output).toBe(true);
    seen.add(call!.name);
  }
  return seen;
}

describe("tool call grammar", () => {
  const tools = [WEATHER, LIST_FILES];

  test("the prefixes are the ones prompt.ts ends the prompt with", () => {
    const defs: ToolDef[] = tools.map((t) => ({ name: t.name, parameters: t.parameters }));
    expect(forcedPrefix("required", defs)).toBe(CALL_PREFIX);
    for (const name of ["get_weather", 'we"ird name', "ünï"]) {
      expect(forcedPrefix({ name }, defs)).toBe(namedCallPrefix(name));
    }
  });

  test("required: the output is one call of either tool, then the close tag", () => {
    const dfa = compileToolCall(tools, "required");
    expect(dfaProblems(dfa)).toEqual([]);
    const rng = new Rng(4242);
    const seen = walkCalls(dfa, tools, CALL_PREFIX, rng, 200);
    expect([...seen].sort()).toEqual(["get_weather", "list_files"]);
    for (const t of tools) {
      for (let i = 0; i < 20; i++) {
        const args = instance(t.parameters, rng);
        const out = callHead(t.name) + serialize(args, rng.pick(["compact", "spaced"] as const)) + "}" +
          CALL_SUFFIX;
        expect(accepts(dfa, out), out).toBe(true);
        const call = parsedCall(CALL_PREFIX, out);
        expect(call?.name).toBe(t.name);
        expect(JSON.parse(call!.arguments)).toEqual(args);
      }
    }
    const ok = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}\n</tool_call>';
    expect(accepts(dfa, ok)).toBe(true);
    for (
      const bad of [
        '{"name": "get_time", "arguments": {}}\n</tool_call>',
        '{"name": "get_weather", "arguments": {"unit": "C"}}\n</tool_call>',
        '{"name": "list_files", "arguments": {"city": "Paris"}}\n</tool_call>',
        '{"name": "list_files", "arguments": {}}',
        '{"name": "list_files", "arguments": {}}\n</tool_call>\n',
        '{"name": "list_files", "arguments": {}} \n</tool_call>',
        '{"name":"list_files","arguments":{}}\n</tool_call>',
        '<tool_call>\n{"name": "list_files", "arguments": {}}\n</tool_call>',
      ]
    ) expect(accepts(dfa, bad), bad).toBe(false);
  });

  test("named: the output is the arguments of that tool and the end of the call", () => {
    const dfa = compileToolCall(tools, { name: "get_weather" });
    expect(dfaProblems(dfa)).toEqual([]);
    const rng = new Rng(777);
    const seen = walkCalls(dfa, tools, namedCallPrefix("get_weather"), rng, 200);
    expect([...seen]).toEqual(["get_weather"]);
    expect(accepts(dfa, '{"city": "Oslo", "days": 3}}\n</tool_call>')).toBe(true);
    expect(accepts(dfa, '{"city": "Oslo"}\n</tool_call>')).toBe(false);
    expect(accepts(dfa, '{"path": "/"}}\n</tool_call>')).toBe(false);
  });

  test("a tool without a schema, or with an untyped one, takes any object as arguments", () => {
    const free: ToolSpec[] = [{ name: "anything", parameters: {} }, {
      name: "described",
      parameters: { description: "x" },
    }];
    const dfa = compileToolCall(free, "required");
    expect(accepts(dfa, '{"name": "anything", "arguments": {"a": [1, {"b": null}]}}\n</tool_call>')).toBe(
      true,
    );
    expect(accepts(dfa, '{"name": "described", "arguments": []}\n</tool_call>')).toBe(false);
    walkCalls(dfa, free, CALL_PREFIX, new Rng(5), 50);
  });

  test("a choice that cannot be met is a ValidationError naming the field", () => {
    expect(() => compileToolCall(tools, { name: "nope" })).toThrow(ValidationError);
    try {
      compileToolCall(tools, { name: "nope" });
    } catch (e) {
      expect((e as ValidationError).param).toBe("tool_choice");
    }
    expect(() => compileToolCall([], "required")).toThrow(/no tools/);
  });
});

describe("agent tool schemas", () => {
  for (const tool of [BASH, EDIT, TODO_WRITE, SHELL]) {
    test(`${tool.name}: compiles, and its calls parse to valid arguments`, () => {
      const dfa = compileToolCall([tool], { name: tool.name });
      const rng = new Rng(tool.name.length * 1009);
      walkCalls(dfa, [tool], namedCallPrefix(tool.name), rng, 100);
      for (let i = 0; i < 30; i++) {
        const args = instance(tool.parameters, rng);
        expect(accepts(dfa, serialize(args, "spaced") + "}" + CALL_SUFFIX)).toBe(true);
      }
    });
  }

  test("a whole agent tool set, required: one automaton within the limit", () => {
    const dfa = compileToolCall(AGENT_TOOLS, "required");
    expect(dfaProblems(dfa)).toEqual([]);
    const seen = walkCalls(dfa, AGENT_TOOLS, CALL_PREFIX, new Rng(31337), 300);
    expect(seen.size).toBeGreaterThan(AGENT_TOOLS.length / 2);
    const edit =
      '{"name": "Edit", "arguments": {"file_path": "/a.ts", "old_string": "x", "new_string": "y"}}';
    expect(accepts(dfa, edit + CALL_SUFFIX)).toBe(true);
    expect(accepts(dfa, edit.replace('"old_string": "x", ', "") + CALL_SUFFIX)).toBe(false);
    const item = '{"content": "a", "status": "done", "activeForm": "b"}';
    const todo = `{"name": "TodoWrite", "arguments": {"todos": [${item}]}}`;
    expect(accepts(dfa, todo + CALL_SUFFIX)).toBe(false);
    expect(accepts(dfa, todo.replace("done", "completed") + CALL_SUFFIX)).toBe(true);
    expect(accepts(dfa, todo.replace('"content": "a"', '"content": ""') + CALL_SUFFIX)).toBe(false);
  });
});
