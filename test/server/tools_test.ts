/**
 * The Hermes tool-call parser on synthetic model output: calls split anywhere across chunks, text around
 * them, malformed calls falling back to content verbatim, and the same result however the text is chunked.
 */
import { describe, expect, test } from "vitest";
import { parseCallBody, ToolCallParser, type ToolPiece } from "../../src/server/tools.ts";

function run(chunks: string[]): ToolPiece[] {
  const p = new ToolCallParser();
  const out: ToolPiece[] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.flush());
  // Merge adjacent text pieces: chunking may split text differently, never its content.
  const merged: ToolPiece[] = [];
  for (const x of out) {
    const last = merged[merged.length - 1];
    if (x.type === "text" && last?.type === "text") last.text += x.text;
    else merged.push(x.type === "text" ? { ...x } : x);
  }
  return merged;
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
    'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}\n</tool_call>';

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
    const s =
      '<tool_call>{"name":"a","arguments":{}}</tool_call>\n<tool_call>{"name":"b","arguments":{"x":[1,2]}}</tool_call>\nDone.';
    const expected = [call("a", {}), call("b", { x: [1, 2] }), { type: "text", text: "\nDone." }];
    expect(run([s])).toEqual(expected);
    expect(run(chars(s))).toEqual(expected);
  });

  test("malformed JSON stays content, byte for byte (with the whitespace before it)", () => {
    const s = 'Sure.\n\n<tool_call>\n{"name": "f", "arguments": {"a": 1,,}}\n</tool_call>\nmore';
    expect(run([s])).toEqual([{ type: "text", text: s }]);
    expect(run(chars(s))).toEqual([{ type: "text", text: s }]);
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
