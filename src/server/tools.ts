/**
 * Tool calls in generated text, Hermes/Qwen form: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`.
 * The parser is streaming and lenient, and never loses text: whatever does not parse as a call is given
 * back as content, byte for byte. Streaming and non-streaming responses are both built from its output, so
 * they carry the same content.
 * @module
 */

export const CALL_OPEN = "<tool_call>";
export const CALL_CLOSE = "</tool_call>";

export interface ParsedCall {
  name: string;
  /** The arguments as a JSON object text (OpenAI's `function.arguments`). */
  arguments: string;
}

export type ToolPiece = { type: "text"; text: string } | { type: "call"; call: ParsedCall };

/**
 * Feeds text as it is generated; returns the pieces that are final. Text that might be the start of a
 * `<tool_call>` is held back, and so is whitespace right before one: a call that parses takes the
 * whitespace with it, a call that does not gives it back with its raw text.
 *
 * @example
 * const p = new ToolCallParser();
 * p.push('Sure.\n<tool_call>{"name": "ls", "arg'); // [{type: "text", text: "Sure."}]
 * p.push('uments": {}}</tool_call>');              // [{type: "call", call: {name: "ls", arguments: "{}"}}]
 */
export class ToolCallParser {
  #buf = "";
  #inCall = false;
  /** Whitespace held before an open tag; it belongs to the call's raw text. */
  #lead = "";

  push(text: string): ToolPiece[] {
    this.#buf += text;
    const out: ToolPiece[] = [];
    for (;;) {
      if (this.#inCall) {
        const end = this.#buf.indexOf(CALL_CLOSE);
        if (end < 0) break;
        this.#closeCall(this.#buf.slice(0, end), CALL_CLOSE, out);
        this.#buf = this.#buf.slice(end + CALL_CLOSE.length);
        continue;
      }
      const open = this.#buf.indexOf(CALL_OPEN);
      if (open >= 0) {
        const before = this.#buf.slice(0, open);
        const body = before.trimEnd();
        emitText(out, body);
        this.#lead = before.slice(body.length);
        this.#buf = this.#buf.slice(open + CALL_OPEN.length);
        this.#inCall = true;
        continue;
      }
      // Keep a possible partial open tag, and the whitespace before it.
      const keep = partialSuffix(this.#buf, CALL_OPEN);
      const head = this.#buf.slice(0, this.#buf.length - keep);
      const body = head.trimEnd();
      emitText(out, body);
      this.#buf = this.#buf.slice(body.length);
      break;
    }
    return out;
  }

  /** End of generation: a call without its close tag still counts if its JSON is complete. */
  flush(): ToolPiece[] {
    const out: ToolPiece[] = [];
    if (this.#inCall) this.#closeCall(this.#buf, "", out);
    else emitText(out, this.#buf);
    this.#buf = "";
    this.#inCall = false;
    return out;
  }

  #closeCall(body: string, close: string, out: ToolPiece[]): void {
    const call = parseCallBody(body);
    if (call) out.push({ type: "call", call });
    else emitText(out, this.#lead + CALL_OPEN + body + close);
    this.#lead = "";
    this.#inCall = false;
  }
}

function emitText(out: ToolPiece[], text: string): void {
  if (!text) return;
  const last = out[out.length - 1];
  if (last?.type === "text") last.text += text;
  else out.push({ type: "text", text });
}

/** Length of the longest suffix of `s` that is a proper prefix of `tag`. */
function partialSuffix(s: string, tag: string): number {
  for (let k = Math.min(tag.length - 1, s.length); k > 0; k--) if (s.endsWith(tag.slice(0, k))) return k;
  return 0;
}

/**
 * The JSON inside a `<tool_call>`, leniently: code fences are ignored, `parameters` is accepted for
 * `arguments`, and arguments given as a JSON string are unwrapped. null when it is not a call.
 */
export function parseCallBody(body: string): ParsedCall | null {
  let s = body.trim();
  const fence = /^```(?:json)?\s*([\s\S]*?)\s*```$/.exec(s);
  if (fence) s = fence[1];
  let v: unknown;
  try {
    v = JSON.parse(s);
  } catch {
    return null;
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o.name !== "string" || !o.name) return null;
  let args = o.arguments ?? o.parameters ?? {};
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      return null;
    }
  }
  if (!args || typeof args !== "object" || Array.isArray(args)) return null;
  return { name: o.name, arguments: JSON.stringify(args) };
}

/** Hermes text of a call, as the model is taught to write it (history of templates without tool support). */
export function formatCall(name: string, args: unknown): string {
  return `${CALL_OPEN}\n${JSON.stringify({ name, arguments: args })}\n${CALL_CLOSE}`;
}
