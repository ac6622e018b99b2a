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
  /**
   * Added tokens as one pattern (longest first) and their ids, when text between them is tokenized on its
   * own (as HF does) so pieces can be cached: agent clients resend the same long system prompt every turn.
   */
  readonly #added: { pattern: RegExp; ids: Map<string, number> } | null;
  readonly #pieces = new Map<string, number[]>();
  #pieceChars = 0;

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
    this.#added = piecewise(json);
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
    if (!this.#added || text.length < PIECE_MIN_CHARS) return this.#encodeRaw(text);
    const out: number[] = [];
    const add = (ids: number[]) => {
      for (const id of ids) out.push(id);
    };
    let last = 0;
    for (const m of text.matchAll(this.#added.pattern)) {
      if (m.index > last) add(this.#piece(text.slice(last, m.index)));
      out.push(this.#added.ids.get(m[0])!);
      last = m.index + m[0].length;
    }
    if (last < text.length) add(this.#piece(text.slice(last)));
    return out;
  }

  #encodeRaw(text: string): number[] {
    return this.#tok.encode(text, { add_special_tokens: false }).ids;
  }

  /** Ids of text between added tokens, from a cache of recent long pieces (least recently used dropped). */
  #piece(text: string): number[] {
    if (text.length < PIECE_MIN_CHARS) return this.#encodeRaw(text);
    let ids = this.#pieces.get(text);
    if (ids) this.#pieces.delete(text);
    else {
      ids = this.#encodeRaw(text);
      this.#pieceChars += text.length;
    }
    this.#pieces.set(text, ids);
    for (const [k] of this.#pieces) {
      if (this.#pieceChars <= PIECE_CACHE_CHARS) break;
      this.#pieces.delete(k);
      this.#pieceChars -= k.length;
    }
    return ids;
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

/** Pieces shorter than this are tokenized each time; the cache keeps at most PIECE_CACHE_CHARS of text. */
const PIECE_MIN_CHARS = 256;
const PIECE_CACHE_CHARS = 8 << 20;

/**
 * The added-token split, where tokenizing the pieces between added tokens apart gives the ids of the whole:
 * added tokens matched on raw text (not normalized, no lstrip/rstrip/single_word), no normalizer or NFC,
 * and a byte-level pre-tokenizer without a prefix space (Qwen, Llama 3). Otherwise null (no piece cache).
 */
function piecewise(json: Record<string, any>): { pattern: RegExp; ids: Map<string, number> } | null {
  const added: any[] = json.added_tokens ?? [];
  if (!added.length || added.some((t) => t.normalized || t.lstrip || t.rstrip || t.single_word)) return null;
  if (json.normalizer && json.normalizer.type !== "NFC") return null;
  const pre = json.pre_tokenizer;
  const parts: any[] = pre?.type === "Sequence" ? pre.pretokenizers : [pre];
  const byteLevel = parts.filter((p) => p?.type === "ByteLevel");
  if (byteLevel.length !== 1 || byteLevel[0].add_prefix_space) return null;
  if (!parts.every((p) => p?.type === "ByteLevel" || p?.type === "Split")) return null;
  const ids = new Map<string, number>(added.map((t) => [t.content as string, t.id as number]));
  const alts = [...ids.keys()].sort((a, b) => b.length - a.length)
    .map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return { pattern: new RegExp(alts.join("|"), "g"), ids };
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
