/**
 * What the chat UI talks to: a model in this tab (local.ts) or the server's OpenAI endpoint (remote.ts).
 * @module
 */

export interface ChatTurn {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface Sampling {
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  seed: number;
  maxTokens: number;
}

export interface ReplyHandlers {
  /** New text, in order (never half a character). */
  onText(text: string): void;
  /** Prompt reading progress, in tokens. */
  onPrefill(processed: number, total: number): void;
}

export interface ReplyStats {
  promptTokens: number;
  completionTokens: number;
  /** From sending the request to the first token. */
  ttftMs: number;
  /** Decode speed after the first token. */
  decodeTps: number;
  finishReason: string;
  /** Generated ids (local mode only; the browser test compares them with the golden file). */
  tokenIds?: number[];
}

export interface ChatBackend {
  /** Shown above the transcript: model name and where it runs. */
  readonly label: string;
  reply(turns: ChatTurn[], sampling: Sampling, handlers: ReplyHandlers, signal: AbortSignal): Promise<ReplyStats>;
}
