/**
 * The exact bytes each token id contributes to the output text, which the grammar mask walks through the
 * automaton (wgsl/grammar_mask.wgsl). Built once per model from tokenizer.json:
 *   byte-level BPE (GPT-2/Qwen `ByteLevel` decoder): each character of the piece maps back to one byte;
 *   SentencePiece-style (`Metaspace`, or `Replace` ▁→" " with `ByteFallback`/`Fuse`/`Strip`): ▁ is a space,
 *   `<0xXX>` pieces are the raw byte XX; non-special added tokens: their content's UTF-8;
 *   special added tokens (<|im_end|>, …) and ids beyond the tokenizer's vocabulary: no bytes, so the mask
 *   never allows them (EOS is allowed by the mask on its own rule).
 * Bytes are what a token adds in the middle of a text: a decoder's beginning-of-text rule (Metaspace's
 * dropped first space, a `Strip` after `Fuse`) is not applied, so a grammar sees the space such a token
 * carries; that is the conservative choice (the grammar must then allow it).
 * @module
 */
import { TokenizerError } from "../errors.ts";

export interface TokenBytes {
  /** Ids 0 .. vocab − 1 (the logit row length; may exceed the tokenizer's vocabulary). */
  vocab: number;
  /** Token t's bytes are bytes[offsets[t] .. offsets[t + 1]); (vocab + 1) entries. */
  offsets: Uint32Array;
  bytes: Uint8Array;
}

/** A piece while the decoder chain runs on it: still text, or already raw bytes (byte fallback). */
type Piece = { text: string } | { raw: Uint8Array };
type Step = (p: Piece) => Piece | null;

/** GPT-2's bytes_to_unicode, inverted: the character a byte-level piece uses for each byte. */
function unicodeToBytes(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return new Map(bs.map((b, i) => [String.fromCharCode(cs[i]), b]));
}

const utf8 = new TextEncoder();

/** A global pattern, or null where JavaScript cannot compile it (an Oniguruma-only regex). */
function compile(source: unknown): RegExp | null {
  if (typeof source !== "string") return null;
  try {
    return new RegExp(source, "gu");
  } catch {
    return null;
  }
}

/** Replaces every match of a tokenizer.json pattern ({String} or {Regex}) in text pieces. */
function replaceStep(pattern: any, content: string): Step {
  const literal = typeof pattern?.String === "string";
  const re = compile(literal ? pattern.String.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : pattern?.Regex);
  if (!re) {
    throw new TokenizerError(`tokenizer.json: decoder Replace pattern ${JSON.stringify(pattern)} cannot run`);
  }
  return (p) => ("text" in p ? { text: p.text.replace(re, content) } : p);
}

/**
 * The decoder chain as per-token steps. `fused` turns true after a `Fuse`: later steps act on the whole
 * text, and of those only `Strip` is known, which changes only the text's ends (not a token's middle).
 */
function decoderSteps(dec: any, out: Step[], state = { fused: false }): Step[] {
  const type = dec?.type;
  if (type === "Sequence") {
    for (const d of dec.decoders ?? []) decoderSteps(d, out, state);
  } else if (type === "ByteLevel") {
    const map = unicodeToBytes();
    out.push((p) => {
      if (!("text" in p)) return p;
      const raw = new Uint8Array(p.text.length);
      for (let i = 0; i < p.text.length; i++) {
        const b = map.get(p.text[i]);
        if (b === undefined) return null; // not a byte-level piece: it cannot be produced as bytes
        raw[i] = b;
      }
      return { raw };
    });
  } else if (type === "Metaspace") {
    out.push(replaceStep({ String: dec.replacement ?? "\u2581" }, " "));
  } else if (type === "Replace") {
    out.push(replaceStep(dec.pattern, dec.content ?? ""));
  } else if (type === "ByteFallback") {
    out.push((p) => {
      const m = "text" in p ? /^<0x([0-9A-Fa-f]{2})>$/.exec(p.text) : null;
      return m ? { raw: Uint8Array.of(parseInt(m[1], 16)) } : p;
    });
  } else if (type === "Fuse") {
    state.fused = true;
  } else if (type === "Strip") {
    if (!state.fused) {
      const c = dec.content ?? " ";
      out.push((p) => {
        if (!("text" in p)) return p;
        let a = 0, b = p.text.length;
        while (a < (dec.start ?? 0) && p.text[a] === c) a++;
        while (p.text.length - b < (dec.stop ?? 0) && b > a && p.text[b - 1] === c) b--;
        return { text: p.text.slice(a, b) };
      });
    }
  } else {
    throw new TokenizerError(
      `tokenizer.json: decoder ${JSON.stringify(type ?? null)} has no per-token byte mapping`,
    );
  }
  return out;
}

/** The model's pieces by id (BPE/WordLevel: {piece: id}; Unigram: [[piece, score], …]). */
function modelPieces(model: any): Map<number, string> {
  const out = new Map<number, string>();
  const v = model?.vocab;
  if (Array.isArray(v)) {
    v.forEach((e: any, id: number) => out.set(id, Array.isArray(e) ? String(e[0]) : String(e)));
  } else if (v && typeof v === "object") {
    for (const [piece, id] of Object.entries(v)) out.set(Number(id), piece);
  } else throw new TokenizerError("tokenizer.json: model.vocab is missing");
  return out;
}

/**
 * Bytes of every id below `vocab`. Throws TokenizerError when the decoder has no per-token byte meaning
 * (WordPiece, CTC, none), so constrained decoding is then unavailable for the model.
 */
export function tokenBytes(json: Record<string, any>, vocab: number): TokenBytes {
  if (json.decoder == null) {
    throw new TokenizerError("tokenizer.json has no decoder: token bytes are unknown");
  }
  const steps = decoderSteps(json.decoder, []);
  const pieces = modelPieces(json.model);
  const added = new Map<number, { content: string; special: boolean }>();
  for (const t of json.added_tokens ?? []) {
    added.set(Number(t.id), { content: String(t.content), special: !!t.special });
  }
  const parts: Uint8Array[] = [];
  let total = 0;
  const offsets = new Uint32Array(vocab + 1);
  for (let id = 0; id < vocab; id++) {
    let b: Uint8Array = new Uint8Array(0);
    const a = added.get(id);
    if (a) {
      if (!a.special) b = utf8.encode(a.content);
    } else {
      const piece = pieces.get(id);
      if (piece !== undefined) {
        let p: Piece | null = { text: piece };
        for (const s of steps) if (p) p = s(p);
        if (p) b = "raw" in p ? p.raw : utf8.encode(p.text);
      }
    }
    parts.push(b);
    total += b.length;
    offsets[id + 1] = total;
  }
  const bytes = new Uint8Array(total);
  parts.forEach((p, id) => bytes.set(p, offsets[id]));
  return { vocab, offsets, bytes };
}

/** Token `id`'s bytes (a view). */
export function bytesOf(tb: TokenBytes, id: number): Uint8Array {
  return tb.bytes.subarray(tb.offsets[id], tb.offsets[id + 1]);
}

/** For each byte value, the lowest id (not in `except`) whose bytes are exactly that byte, or −1. */
export function singleByteTokens(tb: TokenBytes, except: number[] = []): Int32Array {
  const out = new Int32Array(256).fill(-1);
  for (let id = tb.vocab - 1; id >= 0; id--) {
    if (tb.offsets[id + 1] - tb.offsets[id] === 1 && !except.includes(id)) out[tb.bytes[tb.offsets[id]]] = id;
  }
  return out;
}
