/**
 * The prompt worker: chat template, tokenizer and output grammars for one served model, off the HTTP
 * thread (a multi-megabyte prompt tokenizes for seconds; a JSON schema compiles to an automaton in
 * milliseconds to a second). Jobs run one at a time in arrival order; ids go back as transferred arrays.
 * @module
 */
/// <reference lib="deno.worker" />
import { Tokenizer } from "../loader/tokenizer.ts";
import { DiskModelSource } from "../platform/deno.ts";
import { outputGrammar } from "./constraint.ts";
import { fixedSpec, renderChat } from "./prompt.ts";
import { type PromptReply, type PromptRequest, toWireError, type WirePrompt } from "./worker_protocol.ts";

let tokenizer: Tokenizer | null = null;

function post(m: PromptReply, transfer: Transferable[] = []): void {
  self.postMessage(m, transfer);
}

/**
 * An upper bound on the UTF-16 length of one token's text: the longest vocabulary entry. A byte-level BPE
 * entry has one character per byte it stands for, a SentencePiece entry at least one per character.
 */
function maxTokenChars(tokenizerJson: any): number {
  let most = 1;
  const vocab = tokenizerJson?.model?.vocab;
  const pieces: string[] = Array.isArray(vocab)
    ? vocab.map((v: unknown) => (Array.isArray(v) ? String(v[0]) : String(v)))
    : Object.keys(vocab ?? {});
  for (const p of pieces) most = Math.max(most, p.length);
  for (const t of tokenizerJson?.added_tokens ?? []) most = Math.max(most, String(t?.content ?? "").length);
  return most;
}

self.onmessage = async (ev: MessageEvent<PromptRequest>) => {
  const m = ev.data;
  if (m.type === "close") {
    self.close();
    return;
  }
  if (m.type === "load") {
    try {
      const source = new DiskModelSource(m.dir);
      tokenizer = await Tokenizer.load(source);
      const most = maxTokenChars(tokenizer.json);
      source.close();
      post({ type: "loaded", info: { maxTokenChars: most, hasChatTemplate: tokenizer.hasChatTemplate } });
    } catch (e) {
      post({ type: "load_error", error: toWireError(e) });
    }
    return;
  }
  try {
    const tok = tokenizer!;
    let prompt: WirePrompt;
    if (m.job.type === "encode") {
      prompt = { ids: Uint32Array.from(tok.encode(m.job.text)), forced: "", parseTools: false };
    } else {
      const { spec, window } = m.job;
      const r = renderChat(tok, spec);
      const grammar = m.job.grammar ? outputGrammar(spec) : undefined;
      prompt = { ...r, ids: Uint32Array.from(r.ids), ...(grammar ? { grammar } : {}) };
      if (window !== undefined && r.ids.length >= window) {
        prompt.fixedTokens = renderChat(tok, fixedSpec(spec)).ids.length;
      }
    }
    const transfer: Transferable[] = [prompt.ids.buffer];
    if (prompt.grammar) {
      transfer.push(prompt.grammar.next.buffer, prompt.grammar.dist.buffer, prompt.grammar.accept.buffer);
    }
    post({ type: "done", id: m.id, prompt }, transfer);
  } catch (e) {
    post({ type: "failed", id: m.id, error: toWireError(e) });
  }
};
