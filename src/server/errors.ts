/**
 * The one place errors become HTTP: a typed FlintError carries its status; here it gets the body shape of
 * the API the client speaks (Anthropic under /v1/messages, OpenAI elsewhere). Used by app.onError, notFound,
 * and for the error event of a stream that already started.
 * @module
 */
import { ContextWindowError, FlintError, ValidationError } from "../errors.ts";

export type Flavor = "openai" | "anthropic";

export function flavorFor(path: string): Flavor {
  return path.startsWith("/v1/messages") ? "anthropic" : "openai";
}

/** A client error raised by the framework (Hono's HTTPException), keeping its status. */
class HttpError extends FlintError {
  override readonly status: number;
  override readonly code = "invalid_request_error";
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Anything thrown, as a FlintError (unknown errors are internal: 500). */
export function asFlintError(e: unknown): FlintError {
  if (e instanceof FlintError) return e;
  const status = (e as any)?.status;
  if (typeof status === "number" && status >= 400 && status < 500) {
    return new HttpError(status, (e as Error).message || `HTTP ${status}`);
  }
  return new FlintError(`internal error: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

const ANTHROPIC_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "invalid_request_error",
  413: "request_too_large",
  414: "invalid_request_error",
  431: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
};

function openaiType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  return status < 500 ? "invalid_request_error" : "server_error";
}

/**
 * An overflow in the words OpenAI-style clients match (Codex reads the code, pi and opencode the text);
 * one that compacting cannot fix avoids all of them, or opencode would compact and resend forever.
 */
function openaiOverflow(e: ContextWindowError): string {
  const n = `${e.lowerBound ? "at least " : ""}${e.promptTokens}`;
  if (e.compactable) {
    return `Your input exceeds the context window of this model (${n} tokens > ${
      e.contextWindow - 1
    } maximum; ` +
      `the window is ${e.contextWindow} tokens, one of them for the reply).`;
  }
  return `flint cannot answer: the system prompt, the tools and the last message alone take ${n} ` +
    `tokens, and this server's window is ${e.contextWindow}. Start it with a larger --context-window, ` +
    `or send fewer tools.`;
}

/** The error body in the client's API shape. */
export function errorBody(e: FlintError, flavor: Flavor): Record<string, unknown> {
  if (flavor === "anthropic") {
    return { type: "error", error: { type: ANTHROPIC_TYPES[e.status] ?? "api_error", message: e.message } };
  }
  if (e instanceof ContextWindowError) {
    return {
      error: { message: openaiOverflow(e), type: "invalid_request_error", param: "messages", code: e.code },
    };
  }
  const param = e instanceof ValidationError ? e.param : null;
  return { error: { message: e.message, type: openaiType(e.status), param, code: e.code } };
}

/** A JSON error response; 5xx are logged with their cause. */
export function errorResponse(e: unknown, path: string): Response {
  const err = asFlintError(e);
  if (err.status >= 500) console.error(`[flint] ${path}: ${err.message}`, err.cause ?? "");
  return new Response(JSON.stringify(errorBody(err, flavorFor(path))), {
    status: err.status,
    headers: { "content-type": "application/json" },
  });
}
