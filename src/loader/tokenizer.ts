/**
 * Tokenizer (tokenizer.json through @huggingface/tokenizers), chat template (tokenizer_config.json through
 * @huggingface/jinja), and a streaming detokenizer that never emits half a UTF-8 character.
 * @module
 */
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import { LoaderError, TokenizerError } from "../errors.ts";
import type { ModelSource } from "../platform/mod.ts";

export interface ChatMessage {
  role: string;
  content: string | null;
  tool_calls?: unknown[];
  tool_call_id?: string;
  name?: string;
  [k: string]: unknown;
}

export class Tokenizer {
  readonly #tok: HfTokenizer;
  readonly #template: Template | null;
  readonly #config: Record<string, any>;
  /** Ids of added special tokens (never shown in streamed text). */
  readonly specialIds: Set<number>;
  /** The parsed tokenizer.json (read-only; grammar/token_bytes.ts derives each token's bytes from it). */
  readonly json: Readonly<Record<string, any>>;

  private constructor(
    tok: HfTokenizer,
    json: Record<string, any>,
    config: Record<string, any>,
    templateSource: string | null,
    file: string,
  ) {
    this.#tok = tok;
    this.json = json;
    this.#config = config;
    try {
      this.#template = templateSource ? new Template(templateSource) : null;
    } catch (e) {
      throw new LoaderError(file, "chat_template", `cannot parse the template (${(e as Error).message})`);
    }
    this.specialIds = new Set();
    for (const [id, t] of Object.entries(config.added_tokens_decoder ?? {})) {
      if ((t as any)?.special) this.specialIds.add(Number(id));
    }
  }

  /** Reads tokenizer.json and tokenizer_config.json (and chat_template.jinja/json when present). */
  static async load(source: ModelSource): Promise<Tokenizer> {
    const files = await source.list();
    if (!files.includes("tokenizer.json")) {
      throw new LoaderError(`${source.name}/tokenizer.json`, null, "file not found");
    }
    let tj: any, tc: any = {};
    try {
      tj = JSON.parse(await source.readText("tokenizer.json"));
    } catch (e) {
      throw new LoaderError(
        `${source.name}/tokenizer.json`,
        null,
        `not valid JSON (${(e as Error).message})`,
      );
    }
    if (files.includes("tokenizer_config.json")) {
      try {
        tc = JSON.parse(await source.readText("tokenizer_config.json"));
      } catch (e) {
        throw new LoaderError(
          `${source.name}/tokenizer_config.json`,
          null,
          `not valid JSON (${(e as Error).message})`,
        );
      }
    }
    let template: string | null = typeof tc.chat_template === "string" ? tc.chat_template : null;
    if (Array.isArray(tc.chat_template)) {
      template = tc.chat_template.find((t: any) => t.name === "default")?.template ?? null;
    }
    if (files.includes("chat_template.jinja")) template = await source.readText("chat_template.jinja");
    else if (!template && files.includes("chat_template.json")) {
      template = JSON.parse(await source.readText("chat_template.json")).chat_template ?? null;
    }
    let tok: HfTokenizer;
    try {
      tok = new HfTokenizer(tj, tc);
    } catch (e) {
      throw new LoaderError(
        `${source.name}/tokenizer.json`,
        "model",
        `cannot build the tokenizer (${(e as Error).message})`,
      );
    }
    return new Tokenizer(tok, tj, tc, template, `${source.name}/tokenizer_config.json`);
  }

  get hasChatTemplate(): boolean {
    return this.#template !== null;
  }

  /** Token ids of `text`; special-token strings in the text are recognised (chat templates rely on it). */
  encode(text: string): number[] {
    return this.#tok.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: number[], skipSpecial = true): string {
    if (ids.length === 0) return "";
    return this.#tok.decode(ids, { skip_special_tokens: skipSpecial });
  }

  /** Renders the chat template (add_generation_prompt on) to text. */
  applyChatTemplate(
    messages: ChatMessage[],
    opts: { tools?: unknown[]; extra?: Record<string, unknown> } = {},
  ): string {
    if (!this.#template) {
      throw new TokenizerError("this model has no chat template (tokenizer_config.json: chat_template)");
    }
    try {
      return this.#template.render({
        messages,
        tools: opts.tools && opts.tools.length ? opts.tools : undefined,
        add_generation_prompt: true,
        bos_token: tokenString(this.#config.bos_token),
        eos_token: tokenString(this.#config.eos_token),
        ...opts.extra,
      });
    } catch (e) {
      throw new TokenizerError(`chat template failed: ${(e as Error).message}`);
    }
  }

  /** A fresh incremental decoder for one stream of generated ids. */
  stream(): StreamDecoder {
    return new StreamDecoder(this);
  }
}

function tokenString(t: unknown): string {
  if (typeof t === "string") return t;
  if (t && typeof t === "object" && typeof (t as any).content === "string") return (t as any).content;
  return "";
}

/**
 * Incremental detokenization. Decodes a short window of ids and emits only the new text; text that ends in
 * U+FFFD (an incomplete UTF-8 sequence split across tokens) is held back until the next id completes it.
 */
export class StreamDecoder {
  #ids: number[] = [];
  #prefix = 0; // start of the decode window
  #read = 0; // ids already turned into emitted text
  constructor(readonly tok: Tokenizer) {}

  /** Adds one id; returns the newly completed text (possibly ""). */
  push(id: number): string {
    this.#ids.push(id);
    const prev = this.tok.decode(this.#ids.slice(this.#prefix, this.#read));
    const cur = this.tok.decode(this.#ids.slice(this.#prefix));
    if (cur.length > prev.length && !cur.endsWith("\uFFFD")) {
      const text = cur.slice(prev.length);
      this.#prefix = this.#read;
      this.#read = this.#ids.length;
      return text;
    }
    return "";
  }

  /** Whatever is still held back (an incomplete character at the very end is emitted as U+FFFD). */
  flush(): string {
    const prev = this.tok.decode(this.#ids.slice(this.#prefix, this.#read));
    const cur = this.tok.decode(this.#ids.slice(this.#prefix));
    this.#prefix = this.#read = this.#ids.length;
    return cur.length > prev.length ? cur.slice(prev.length) : "";
  }
}
