/**
 * The Hermes tool-call parser on synthetic model output: calls split anywhere across chunks, text around
 * them, malformed calls falling back to content verbatim, and the same result however the text is chunked.
 */
import { describe, expect, test } from "vitest";
import {
  assembleCalls,
  type AssembledPiece,
  parseCallBody,
  ToolCallParser,
  type ToolPiece,
} from "../../src/server/tools.ts";

function pieces(chunks: string[]): ToolPiece[] {
  const p = new ToolCallParser();
  const out: ToolPiece[] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.flush());
  return out;
}

/** Whole calls (arguments compared as JSON where they parse) and merged text. */
function run(chunks: string[]): AssembledPiece[] {
  return assembleCalls(pieces(chunks)).map((x) => {
    if (x.type === "text") return x;
    try {
      return {
        type: "call",
        call: { name: x.call.name, arguments: JSON.stringify(JSON.parse(x.call.arguments)) },
      };
    } catch {
      return x;
    }
  });
}

const chars = (s: string) => [...s];
/** Deterministic pseudo-random split of `s` into chunks of 1..7 characters. */
function randomChunks(s: string, seed: number): string[] {
  const out: string[] = [];
  let x = seed;
  for (let i = 0; i < s.length;) {
    x = (x * 1103515245 + 12345) >>> 0;
    const n = 1 + (x % 7);
    out.push(s.slice(i, i + n));
    i += n;
  }
  return out;
}

const call = (name: string, args: unknown) => ({
  type: "call",
  call: { name, arguments: JSON.stringify(args) },
});

describe("ToolCallParser", () => {
  const text =
    'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}\n' +
    "</tool_call>";

  test("a call with text before it", () => {
    expect(run([text])).toEqual([
      { type: "text", text: "Let me check." },
      call("get_weather", { city: "Paris", unit: "C" }),
    ]);
  });

  test("the same pieces when the text arrives one character at a time, or in random chunks", () => {
    const whole = run([text]);
    expect(run(chars(text))).toEqual(whole);
    for (let seed = 1; seed <= 20; seed++) expect(run(randomChunks(text, seed))).toEqual(whole);
  });

  test("the open tag split exactly at every position", () => {
    for (let k = 1; k < text.length; k++) expect(run([text.slice(0, k), text.slice(k)])).toEqual(run([text]));
  });

  test("text that only looks like the start of a tag is released", () => {
    const p = new ToolCallParser();
    expect(p.push("a <tool")).toEqual([{ type: "text", text: "a" }]);
    expect(p.push("box> b")).toEqual([{ type: "text", text: " <toolbox> b" }]);
    expect(p.flush()).toEqual([]);
  });

  test("a partial tag at the very end is text", () => {
    expect(run(["x = 1 <tool_c"])).toEqual([{ type: "text", text: "x = 1 <tool_c" }]);
  });

  test("two calls and text after them", () => {
    const s = '<tool_call>{"name":"a","arguments":{}}</tool_call>\n' +
      '<tool_call>{"name":"b","arguments":{"x":[1,2]}}</tool_call>\nDone.';
    const expected = [call("a", {}), call("b", { x: [1, 2] }), { type: "text", text: "\nDone." }];
    expect(run([s])).toEqual(expected);
    expect(run(chars(s))).toEqual(expected);
  });

  test(
    "malformed JSON in a call read whole stays content, " +
      "byte for byte (with the whitespace before it)",
    () => {
      const s = 'Sure.\n\n<tool_call>\n{"name": "f", "parameters": {"a": 1,,}}\n</tool_call>\nmore';
      expect(run([s])).toEqual([{ type: "text", text: s }]);
      expect(run(chars(s))).toEqual([{ type: "text", text: s }]);
    },
  );

  test("arguments stream as deltas once the name is known; their concatenation is the arguments text", () => {
    const s =
      'Ok.\n<tool_call>\n{"name": "write", "arguments": {"path": "a.txt", "text": "x </tool_call> y}"}}\n' +
      "</tool_call>";
    for (let seed = 1; seed <= 10; seed++) {
      const out = pieces(randomChunks(s, seed));
      const deltas = out.filter((p) => p.type === "call_args").map((p) => (p as { delta: string }).delta);
      expect(deltas.length).toBeGreaterThan(1);
      expect(out.find((p) => p.type === "call_start")).toEqual({ type: "call_start", name: "write" });
      const end = out.find((p) => p.type === "call_end") as { arguments: string };
      expect(deltas.join("")).toBe(end.arguments);
      expect(JSON.parse(end.arguments)).toEqual({ path: "a.txt", text: "x </tool_call> y}" });
    }
  });

  test("arguments that stop being JSON after the first key end there; the rest is text", () => {
    const s = '<tool_call>\n{"name": "f", "arguments": {"a": 1,,}}\n</tool_call>\nmore';
    expect(assembleCalls(pieces([s]))).toEqual([
      { type: "call", call: { name: "f", arguments: '{"a": 1,' } },
      { type: "text", text: ",}}\nmore" },
    ]);
    // Cut inside a string value: the arguments are closed (as a client's partial-JSON parser reads them).
    const cut = '<tool_call>{"name": "w", "arguments": {"path": "a.txt", "text": "hel';
    for (const chunks of [[cut], chars(cut)]) {
      expect(assembleCalls(pieces(chunks))).toEqual([
        { type: "call", call: { name: "w", arguments: '{"path": "a.txt", "text": "hel"}' } },
      ]);
    }
  });

  test("arguments that are not JSON from their first character are read whole, and stay text", () => {
    const s = 'Here:\n<tool_call>\n{"name": "ls", "arguments": {oops}}\n</tool_call>';
    for (const chunks of [[s], chars(s)]) expect(run(chunks)).toEqual([{ type: "text", text: s }]);
  });

  test("a call without a name, or with arguments that are not an object, stays content", () => {
    for (
      const body of [
        '{"arguments": {}}',
        '{"name": "", "arguments": {}}',
        '{"name": "f", "arguments": [1]}',
        "[1,2]",
        '"f"',
      ]
    ) {
      const s = `<tool_call>${body}</tool_call>`;
      expect(run([s])).toEqual([{ type: "text", text: s }]);
    }
  });

  test("a call cut off by the end of generation: complete JSON counts, incomplete stays content", () => {
    expect(run(['<tool_call>\n{"name": "f", "arguments": {"q": "x"}}\n'])).toEqual([call("f", { q: "x" })]);
    const cut = '<tool_call>\n{"name": "f", "argu';
    expect(run([cut])).toEqual([{ type: "text", text: cut }]);
  });

  test("lenient forms: parameters for arguments, arguments as a JSON string, a ```json fence", () => {
    expect(parseCallBody('{"name": "f", "parameters": {"a": 1}}')).toEqual({
      name: "f",
      arguments: '{"a":1}',
    });
    expect(parseCallBody('{"name": "f", "arguments": "{\\"a\\": 1}"}')).toEqual({
      name: "f",
      arguments: '{"a":1}',
    });
    expect(parseCallBody('```json\n{"name": "f", "arguments": {}}\n```')).toEqual({
      name: "f",
      arguments: "{}",
    });
    expect(parseCallBody('{"name": "f"}')).toEqual({ name: "f", arguments: "{}" });
    expect(parseCallBody('{"name": "f", "arguments": "not json"}')).toBeNull();
  });

  test("no text is ever lost: text pieces plus raw calls reproduce the input", () => {
    const samples = [
      "plain text with < and <tool and </tool_call> but no call",
      'a<tool_call>{"name":"x"}</tool_call>b<tool_call>{bad}</tool_call>c',
      "trailing whitespace   \n\t",
      "<tool_call><tool_call>{}</tool_call>",
    ];
    for (const s of samples) {
      for (let seed = 1; seed <= 10; seed++) {
        const pieces = run(randomChunks(s, seed));
        expect(pieces).toEqual(run([s]));
        const calls = pieces.filter((p) => p.type === "call").length;
        const text = pieces.map((p) => (p.type === "text" ? p.text : "")).join("");
        // Only whitespace next to a parsed call may be absorbed into it.
        if (!calls) expect(text).toBe(s);
      }
    }
  });
});
