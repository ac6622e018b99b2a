/**
 * Architecture fixtures as servable chat models: the fixtures are bare checkpoints (vocab 512, no
 * tokenizer), so this writes, next to links to their weights, a byte-level tokenizer (ids 0–255: one byte
 * each; <|im_start|>, <|im_end|>, <|endoftext|> at 509–511), a ChatML template, and <|im_end|> as EOS.
 * Random weights then write random bytes: what constrained decoding must still turn into valid output.
 */
import { FIXTURES } from "./fixtures.ts";

/** GPT-2's byte ↔ printable-character map, which byte-level BPE vocabularies are written in. */
function byteChars(): string[] {
  const keep: number[] = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const out = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  return out;
}

const SPECIAL = { "<|im_start|>": 509, "<|im_end|>": 510, "<|endoftext|>": 511 };

export const CHATML =
  "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + " +
  "'<|im_end|>\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

function tokenizerJson(): unknown {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, b) => (vocab[c] = b));
  const level = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: Object.entries(SPECIAL).map(([content, id]) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: level,
    post_processor: null,
    decoder: level,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

/**
 * A folder `dir/<name>` serving fixture `name` as a chat model (weights linked, not copied); returns it.
 */
export async function chatFixture(dir: string, name: string): Promise<string> {
  const out = `${dir}/${name}`;
  await Deno.mkdir(out, { recursive: true });
  const config = JSON.parse(await Deno.readTextFile(`${FIXTURES}/${name}/config.json`));
  config.eos_token_id = SPECIAL["<|im_end|>"];
  await Deno.writeTextFile(`${out}/config.json`, JSON.stringify(config));
  await Deno.symlink(`${FIXTURES}/${name}/model.safetensors`, `${out}/model.safetensors`);
  await Deno.writeTextFile(`${out}/tokenizer.json`, JSON.stringify(tokenizerJson()));
  await Deno.writeTextFile(
    `${out}/tokenizer_config.json`,
    JSON.stringify({
      chat_template: CHATML,
      eos_token: "<|im_end|>",
      added_tokens_decoder: Object.fromEntries(
        Object.entries(SPECIAL).map(([content, id]) => [id, { content, special: true }]),
      ),
    }),
  );
  return out;
}
