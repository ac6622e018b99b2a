/**
 * An incremental JSON syntax checker, one character at a time, for tool-call arguments that stream while
 * the model writes them: it says when a character can no longer be JSON (so the call ends there instead of
 * sending clients text their JSON parsers reject), when the value is complete, and how to close a prefix
 * cut short (`closeJson`: the text up to its last complete value, with the open strings and brackets shut).
 * @module
 */

type State =
  | "value" // a value must come (after ":" or "," in an array, or at the start)
  | "value_or_end" // after "[": a value or "]"
  | "key_or_end" // after "{": a key or "}"
  | "key" // after "," in an object
  | "colon"
  | "after_value" // "," or the container's end
  | "string"
  | "escape"
  | "unicode"
  | "number"
  | "literal"
  | "done";

const WS = " \t\n\r";
const NUMBER_CHARS = "0123456789+-.eE";

export class JsonScanner {
  #state: State = "value";
  #stack: ("{" | "[")[] = [];
  #isKey = false;
  #hex = 0;
  #literal = "";
  #number = "";
  #pos = 0;
  /** End of the last complete value, and the brackets open there: a prefix that can be closed. */
  #safe = { pos: 0, stack: [] as ("{" | "[")[], inValueString: false };

  get done(): boolean {
    return this.#state === "done";
  }

  /** A key and its colon were read, or the value is done: it is clearly an object being written. */
  get committed(): boolean {
    return this.#committed || this.#state === "done";
  }
  #committed = false;

  /** Feeds one character; false when it cannot continue JSON (the scanner is then unchanged). */
  push(ch: string): boolean {
    const ok = this.#step(ch);
    if (ok) this.#pos++;
    return ok;
  }

  /** The longest prefix (of what was pushed) that closes into valid JSON, and the text that closes it. */
  closable(): { length: number; suffix: string } {
    const closers = [...this.#safe.stack].reverse().map((b) => (b === "{" ? "}" : "]")).join("");
    return { length: this.#safe.pos, suffix: (this.#safe.inValueString ? '"' : "") + closers };
  }

  #markSafe(extra = 0, inValueString = false): void {
    this.#safe = { pos: this.#pos + extra, stack: [...this.#stack], inValueString };
  }

  #valueEnded(extra: number): void {
    this.#state = this.#stack.length ? "after_value" : "done";
    this.#markSafe(extra);
  }

  #step(ch: string): boolean {
    switch (this.#state) {
      case "done":
        return WS.includes(ch);
      case "string":
        if (ch === "\\") this.#state = "escape";
        else if (ch === '"') {
          if (this.#isKey) this.#state = "colon";
          else this.#valueEnded(1);
        } else if (ch < " ") return false;
        else if (!this.#isKey) this.#markSafe(1, true);
        return true;
      case "escape":
        if (ch === "u") {
          this.#hex = 0;
          this.#state = "unicode";
        } else if ('"\\/bfnrt'.includes(ch)) this.#state = "string";
        else return false;
        return true;
      case "unicode":
        if (!/[0-9a-fA-F]/.test(ch)) return false;
        if (++this.#hex === 4) this.#state = "string";
        return true;
      case "number":
        if (NUMBER_CHARS.includes(ch) && isNumberPrefix(this.#number + ch)) {
          this.#number += ch;
          if (isNumber(this.#number)) this.#markSafe(1);
          return true;
        }
        if (!isNumber(this.#number)) return false;
        this.#valueEnded(0);
        return this.#step(ch);
      case "literal": {
        const next = this.#literal + ch;
        if (!["true", "false", "null"].some((w) => w.startsWith(next))) return false;
        this.#literal = next;
        if (next === "true" || next === "false" || next === "null") this.#valueEnded(1);
        return true;
      }
      case "colon":
        if (WS.includes(ch)) return true;
        if (ch !== ":") return false;
        this.#state = "value";
        this.#committed = true;
        return true;
      case "after_value": {
        if (WS.includes(ch)) return true;
        const top = this.#stack[this.#stack.length - 1];
        if (ch === ",") this.#state = top === "{" ? "key" : "value";
        else if ((ch === "}" && top === "{") || (ch === "]" && top === "[")) {
          this.#stack.pop();
          this.#valueEnded(1);
        } else return false;
        return true;
      }
      case "key_or_end":
      case "key":
        if (WS.includes(ch)) return true;
        if (ch === "}" && this.#state === "key_or_end") {
          this.#stack.pop();
          this.#valueEnded(1);
          return true;
        }
        if (ch !== '"') return false;
        this.#isKey = true;
        this.#state = "string";
        return true;
      case "value_or_end":
        if (ch === "]") {
          this.#stack.pop();
          this.#valueEnded(1);
          return true;
        }
        return this.#startValue(ch);
      case "value":
        return this.#startValue(ch);
    }
  }

  #startValue(ch: string): boolean {
    if (WS.includes(ch)) return true;
    if (ch === "{" || ch === "[") {
      this.#stack.push(ch);
      this.#state = ch === "{" ? "key_or_end" : "value_or_end";
      this.#markSafe(1);
    } else if (ch === '"') {
      this.#isKey = false;
      this.#state = "string";
      this.#markSafe(1, true);
    } else if (ch === "-" || (ch >= "0" && ch <= "9")) {
      this.#number = ch;
      this.#state = "number";
      if (isNumber(ch)) this.#markSafe(1);
    } else if ("tfn".includes(ch)) {
      this.#literal = ch;
      this.#state = "literal";
    } else return false;
    return true;
  }
}

function isNumber(s: string): boolean {
  return /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(s);
}

function isNumberPrefix(s: string): boolean {
  return /^-?(0|[1-9]\d*)?(\.\d*)?([eE][+-]?\d*)?$/.test(s) && !/^-?0\d/.test(s);
}

/** `text` as JSON if it is; else its longest closable prefix, closed; null when nothing can be saved. */
export function closeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch { /* close it below */ }
  const sc = new JsonScanner();
  for (let i = 0; i < text.length && sc.push(text[i]); i++);
  const { length, suffix } = sc.closable();
  try {
    return JSON.parse(text.slice(0, length) + suffix);
  } catch {
    return null;
  }
}
