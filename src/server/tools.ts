/**
 * Tool calls in generated text, Hermes/Qwen form: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`.
 * The parser is streaming and lenient, and never loses text: whatever does not parse as a call is given
 * back as content, byte for byte. Streaming and non-streaming responses are both built from its output, so
 * they carry the same content.
 * @module
 */

import { JsonScanner } from "./json_scan.ts";

export const CALL_OPEN = "<tool_call>";
export const CALL_CLOSE = "</tool_call>";

export interface ParsedCall {
  name: string;
  /** The arguments as a JSON object text (OpenAI's `function.arguments`). */
  arguments: string;
}

/**
 * Output as it becomes final: text, or a call in three parts so its arguments can stream: `call_start`
 * (the name is known), `call_args` (the next piece of the arguments' JSON text), `call_end` (with the whole
 * arguments text, the concatenation of the deltas). `assembleCalls` turns them back into whole calls.
 */
export type ToolPiece =
  | { type: "text"; text: string }
  | { type: "call_start"; name: string }
  | { type: "call_args"; delta: string }
  | { type: "call_end"; arguments: string };

export type AssembledPiece = { type: "text"; text: string } | { type: "call"; call: ParsedCall };

/** Whole calls from streamed parts (non-streaming responses, tests). */
export function assembleCalls(pieces: ToolPiece[]): AssembledPiece[] {
  const out: AssembledPiece[] = [];
  let name = "";
  for (const p of pieces) {
    if (p.type === "text") emitText(out, p.text);
    else if (p.type === "call_start") name = p.name;
    else if (p.type === "call_end") out.push({ type: "call", call: { name, arguments: p.arguments } });
  }
  return out;
}

/** `{"name": "…", "arguments": ` with any JSON whitespace: the head of a call whose arguments can stream. */
const CALL_HEAD = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*/;

/**
 * Feeds text as it is generated; returns the pieces that are final. Text that might be the start of a
 * `<tool_call>` is held back, and so is whitespace right before one. A call that opens with its name and
 * then an object of arguments streams them as they come, checked as JSON character by character
 * (json_scan.ts): once its first key is read the call is committed; a character that breaks the JSON
 * ends the arguments there (closed where that only needs closing quotes and brackets), and what follows up
 * to the close tag is text. Any other call is read whole at its close tag and parsed leniently; if it does
 * not parse it is given back as text, with the whitespace before it.
 *
 * @example
 * const p = new ToolCallParser();
 * // text "Sure." (the call is not committed yet):
 * p.push('Sure.\n<tool_call>{"name": "ls", "arguments": {"d');
 * p.push('": 1}}</tool_call>');   // call_start ls, call_args '{"d": 1}', call_end '{"d": 1}'
 */
export class ToolCallParser {
  #buf = "";
  #mode: "text" | "head" | "args" | "tail" = "text";
  /** Whitespace held before an open tag; it belongs to the call's raw text. */
  #lead = "";
  /** Head mode: the arguments after a matched head, checked but not yet committed. */
  #pending: { name: string; headLength: number; scanner: JsonScanner; scanned: number } | null = null;
  #scanner: JsonScanner | null = null;
  #args = "";

  push(text: string): ToolPiece[] {
    this.#buf += text;
    const out: ToolPiece[] = [];
    for (;;) {
      if (this.#mode === "args") {
        if (!this.#scanArgs(out)) break;
        continue;
      }
      if (this.#mode === "tail") {
        const end = this.#buf.indexOf(CALL_CLOSE);
        if (end < 0) break;
        this.#endTail(this.#buf.slice(0, end), out);
        this.#buf = this.#buf.slice(end + CALL_CLOSE.length);
        continue;
      }
      if (this.#mode === "head") {
        if (this.#tryCommit(out)) continue;
        const end = this.#buf.indexOf(CALL_CLOSE);
        if (end >= 0) {
          this.#closeCall(this.#buf.slice(0, end), CALL_CLOSE, out);
          this.#buf = this.#buf.slice(end + CALL_CLOSE.length);
          continue;
        }
        break; // wait for more: the head, or the close tag of a call read whole
      }
      const open = this.#buf.indexOf(CALL_OPEN);
      if (open >= 0) {
        const before = this.#buf.slice(0, open);
        const body = before.trimEnd();
        emitText(out, body);
        this.#lead = before.slice(body.length);
        this.#buf = this.#buf.slice(open + CALL_OPEN.length);
        this.#mode = "head";
        this.#pending = null;
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

  /** End of generation: a streamed call ends with what it has; a call read whole counts if it parses. */
  flush(): ToolPiece[] {
    const out: ToolPiece[] = [];
    if (this.#mode === "args") this.#endArgs(out);
    if (this.#mode === "tail") this.#endTail(this.#buf, out);
    else if (this.#mode === "head") this.#closeCall(this.#buf, "", out);
    else emitText(out, this.#buf);
    this.#buf = "";
    this.#mode = "text";
    return out;
  }

  /** Head mode: a name, then arguments checked as JSON up to their first key; true once committed. */
  #tryCommit(out: ToolPiece[]): boolean {
    if (!this.#pending) {
      const head = CALL_HEAD.exec(this.#buf);
      if (!head || this.#buf[head[0].length] !== "{") return false;
      let name = "";
      try {
        name = JSON.parse(`"${head[1]}"`);
      } catch { /* not a name */ }
      if (!name) return false;
      this.#pending = { name, headLength: head[0].length, scanner: new JsonScanner(), scanned: 0 };
    }
    const p = this.#pending;
    const args = this.#buf.slice(p.headLength);
    for (; p.scanned < args.length && !p.scanner.committed; p.scanned++) {
      if (!p.scanner.push(args[p.scanned])) {
        // Not JSON from the start: read the call whole at its close tag instead.
        this.#pending = { ...p, scanned: Infinity };
        return false;
      }
    }
    if (!p.scanner.committed) return false;
    out.push({ type: "call_start", name: p.name });
    this.#scanner = p.scanner;
    this.#args = args.slice(0, p.scanned);
    out.push({ type: "call_args", delta: this.#args });
    this.#buf = args.slice(p.scanned);
    this.#pending = null;
    this.#lead = "";
    this.#mode = this.#scanner.done ? "tail" : "args";
    if (this.#mode === "tail") out.push({ type: "call_end", arguments: this.#args });
    return true;
  }

  /** Streams the arguments' characters while they are JSON; true when they ended (complete or broken). */
  #scanArgs(out: ToolPiece[]): boolean {
    const sc = this.#scanner!;
    let i = 0;
    let ended = false;
    for (; i < this.#buf.length; i++) {
      if (!sc.push(this.#buf[i])) {
        ended = true;
        break;
      }
      if (sc.done) {
        i++;
        ended = true;
        break;
      }
    }
    const delta = this.#buf.slice(0, i);
    this.#buf = this.#buf.slice(i);
    if (delta) {
      this.#args += delta;
      out.push({ type: "call_args", delta });
    }
    if (ended) this.#endArgs(out);
    return ended;
  }

  /** The arguments end: closed with quotes and brackets when that is all they lack. */
  #endArgs(out: ToolPiece[]): void {
    const sc = this.#scanner!;
    if (!sc.done) {
      const { length, suffix } = sc.closable();
      if (length === this.#args.length && suffix) {
        this.#args += suffix;
        out.push({ type: "call_args", delta: suffix });
      }
    }
    out.push({ type: "call_end", arguments: this.#args });
    this.#scanner = null;
    this.#args = "";
    this.#mode = "tail";
  }

  /** After the arguments: the call's closing `}`; anything else before the close tag stays text. */
  #endTail(tail: string, out: ToolPiece[]): void {
    emitText(out, tail.trim().replace(/^\}/, "").trim());
    this.#mode = "text";
  }

  #closeCall(body: string, close: string, out: ToolPiece[]): void {
    const call = parseCallBody(body);
    if (call) {
      out.push({ type: "call_start", name: call.name });
      out.push({ type: "call_args", delta: call.arguments });
      out.push({ type: "call_end", arguments: call.arguments });
    } else emitText(out, this.#lead + CALL_OPEN + body + close);
    this.#lead = "";
    this.#pending = null;
    this.#mode = "text";
  }
}

function emitText(out: (ToolPiece | AssembledPiece)[], text: string): void {
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
