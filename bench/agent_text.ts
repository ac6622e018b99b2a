/**
 * Deterministic agent-like text for bench/agent_session.ts: a system prompt of tool JSON schemas and
 * numbered rules, and turns of tool output (source, grep hits, test logs, diffs) or user requests, each
 * filled to a token count with the model's tokenizer. The same seed gives the same text on every run.
 * @module
 */
import type { Tokenizer } from "../src/loader/tokenizer.ts";

export function rng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const [VERBS, NOUNS, ADJS, TYPES] = [
  "read write list search patch run fetch parse build test format lint rename delete create watch diff merge",
  "file dir symbol test branch commit issue config module route schema job log record cache token page",
  "pending cached remote local stale partial nested optional visible strict dirty shared",
  "string integer boolean number array",
].map((s) => s.split(" "));
const CLAUSES = [
  "unless the user has said otherwise,and report what changed in one line,before touching files outside",
  "the workspace,with the smallest diff that works,and quote the exact error message,only after the tests",
  "pass,so that the next step can read it",
].join(" ").split(",");

export class Text {
  constructor(readonly r: () => number) {}
  pick<T>(xs: T[]): T {
    return xs[Math.floor(this.r() * xs.length)];
  }
  int(a: number, b: number): number {
    return a + Math.floor(this.r() * (b - a + 1));
  }
  id(): string {
    const n = this.pick(NOUNS);
    return `${this.pick(VERBS)}${n[0].toUpperCase()}${n.slice(1)}${this.int(0, 99)}`;
  }
  tool(i: number): string {
    const props: Record<string, unknown> = {};
    const n = this.int(3, 7);
    for (let k = 0; k < n; k++) {
      const type = this.pick(TYPES);
      props[`${this.pick(ADJS)}_${this.pick(NOUNS)}`] = {
        type,
        description: `The ${this.pick(ADJS)} ${this.pick(NOUNS)} to ${this.pick(VERBS)}, ${
          this.pick(CLAUSES)
        }.`,
        ...(type === "array" ? { items: { type: "string" } } : {}),
        ...(type === "integer" ? { minimum: 0, default: this.int(1, 500) } : {}),
      };
    }
    const name = `${this.pick(VERBS)}_${this.pick(NOUNS)}_${i}`;
    const description = `Use this to ${this.pick(VERBS)} a ${this.pick(ADJS)} ${this.pick(NOUNS)}; ` +
      `it returns the ${this.pick(NOUNS)} ${this.pick(CLAUSES)}.`;
    const required = Object.keys(props).slice(0, this.int(1, n));
    const parameters = { type: "object", properties: props, required };
    return JSON.stringify({ type: "function", function: { name, description, parameters } });
  }
  rule(i: number): string {
    const lead = this.pick(["Always", "Never", "Before you", "After you", "When asked to", "If you cannot"]);
    return `${i}. ${lead} ${this.pick(VERBS)} the ${this.pick(ADJS)} ${this.pick(NOUNS)} ${
      this.pick(CLAUSES)
    }.`;
  }
  /** One line of a tool's output: source, grep hits, a test log or a diff. */
  resultLine(kind: number, line: number): string {
    const path = `src/${this.pick(NOUNS)}/${this.pick(VERBS)}_${this.pick(NOUNS)}.ts`;
    switch (kind) {
      case 0:
        return `${String(line).padStart(4)}  ${"  ".repeat(this.int(0, 3))}const ${this.id()} = ` +
          `await ${this.id()}(${this.id()}, ${this.int(0, 4096)});`;
      case 1:
        return `${path}:${this.int(1, 900)}:  if (${this.id()}.${this.pick(NOUNS)} === ` +
          `"${this.pick(ADJS)}") return ${this.id()};`;
      case 2:
        return this.r() < 0.9
          ? `test ${this.pick(NOUNS)} ${this.pick(VERBS)}s ${this.pick(ADJS)} ${this.pick(NOUNS)} ... ok ` +
            `(${this.int(1, 900)}ms)`
          : `FAILED ${path}:${this.int(1, 900)} expected ${this.int(0, 99)}, got ${this.int(100, 999)}`;
      default:
        return `${this.pick(["+", "-", " "])}  ${this.pick(["let", "const", "return"])} ${this.id()} = ` +
          `${this.id()}.${this.pick(VERBS)}(${this.int(0, 64)});`;
    }
  }
  prose(): string {
    return `Please ${this.pick(VERBS)} the ${this.pick(ADJS)} ${this.pick(NOUNS)} in ` +
      `src/${this.pick(NOUNS)}/ ${this.pick(CLAUSES)}; then ${this.pick(VERBS)} the ${this.pick(NOUNS)} ` +
      `tests and ${this.pick(VERBS)} ${this.id()}.`;
  }
}

/** Lines from `next` until their token count reaches `target`. */
export function fill(tok: Tokenizer, target: number, next: (i: number) => string): string {
  const out: string[] = [];
  for (let n = 0; n < target;) {
    const line = next(out.length);
    out.push(line);
    n += tok.encode(line + "\n").length;
  }
  return out.join("\n");
}

export function systemPrompt(tok: Tokenizer, t: Text, tokens: number): string {
  const tools = fill(tok, Math.round(tokens * 0.6), (i) => t.tool(i));
  const head = "You are a coding agent working in a git repository. Call tools to read and change files.\n" +
    "# Tools\n<tools>\n" + tools + "\n</tools>\n# Rules\n";
  return head + fill(tok, tokens - tok.encode(head).length, (i) => t.rule(i + 1));
}

export function turnMessage(tok: Tokenizer, t: Text, i: number, tokens: number): string {
  if (i % 4 === 0) return fill(tok, tokens, (k) => (k % 6 === 0 ? t.prose() : t.resultLine(0, k)));
  const kind = t.int(0, 3);
  const head = `<tool_response>\n$ ${t.pick(VERBS)}_${t.pick(NOUNS)} --${t.pick(ADJS)} (exit 0)\n`;
  return head + fill(tok, tokens - 16, (k) => t.resultLine(kind, k + 1)) + "\n</tool_response>";
}
