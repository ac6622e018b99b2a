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
  /**
   * Prompt reading progress, in tokens. `estimated`: a guess between two real reports (time-based); it never
   * goes backwards and never reaches `total`, which only a real report does.
   */
  onPrefill(processed: number, total: number, estimated: boolean): void;
}

export interface ReplyStats {
  /** Token counts; null when unknown (a server stream stopped before its usage report). */
  promptTokens: number | null;
  /** Prompt tokens whose KV came from the prefix cache; null (or absent, in older stored stats): unknown. */
  cachedTokens?: number | null;
  completionTokens: number | null;
  /** From sending the request to the first token; null when no token came. */
  ttftMs: number | null;
  /** Decode speed after the first token; null when unknown. */
  decodeTps: number | null;
  finishReason: string;
  /** Generated ids (local mode only; the browser test compares them with the golden file). */
  tokenIds?: number[];
}

export interface ChatBackend {
  /** Shown above the transcript: model name and where it runs. */
  readonly label: string;
  reply(
    turns: ChatTurn[],
    sampling: Sampling,
    handlers: ReplyHandlers,
    signal: AbortSignal,
  ): Promise<ReplyStats>;
}
