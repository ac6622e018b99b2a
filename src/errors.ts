/**
 * Typed errors for every failure a user can cause or meet. The server maps them to HTTP status and
 * OpenAI/Anthropic error bodies in one handler; the CLI prints `message` (which names the file and field).
 * @module
 */

/** Base class: `status` is the HTTP status the server answers with, `code` a stable machine-readable id. */
export class FlintError extends Error {
  readonly status: number = 500;
  readonly code: string = "internal_error";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A model folder or file is missing, malformed or inconsistent. Names the file and the tensor/field. */
export class LoaderError extends FlintError {
  override readonly status = 400;
  override readonly code = "model_load_error";
  constructor(readonly file: string, readonly field: string | null, detail: string) {
    super(`${file}${field ? `: ${field}` : ""}: ${detail}`);
  }
}

/** `config.json` names an architecture this build does not implement. */
export class UnsupportedModelError extends LoaderError {
  constructor(file: string, modelType: string, supported: string[]) {
    super(file, "model_type", `unsupported model_type "${modelType}"; supported: ${supported.join(", ")}`);
  }
}

/** Tokenizer or chat-template problem (bad template, missing tokenizer.json). */
export class TokenizerError extends FlintError {
  override readonly status = 400;
  override readonly code = "tokenizer_error";
}

/**
 * The prompt does not fit the context window (it must leave room for at least one new token), or, from the
 * engine's own API, prompt plus max new tokens do not. Never truncated silently. Agents compact their
 * history on this error, so the server words it per API the way each client recognises (server/errors.ts);
 * `compactable` is false when the system prompt, tools and last message alone do not fit, where compacting
 * the history cannot help and an agent must be told something it will not retry.
 */
export class ContextWindowError extends FlintError {
  override readonly status = 400;
  override readonly code: string = "context_length_exceeded";
  readonly compactable: boolean;
  readonly lowerBound: boolean;
  constructor(
    readonly promptTokens: number,
    readonly maxTokens: number,
    readonly contextWindow: number,
    opts: { lowerBound?: boolean; compactable?: boolean } = {},
  ) {
    super(
      maxTokens > 0 && promptTokens < contextWindow
        ? `prompt is too long: ${promptTokens + maxTokens} tokens > ${contextWindow} maximum ` +
          `(${promptTokens} prompt tokens + ${maxTokens} max new tokens)`
        : `prompt is too long: ${promptTokens} tokens > ${contextWindow - 1} maximum ` +
          `(${opts.lowerBound ? "at least; counted from its length before tokenizing; " : ""}` +
          `the context window is ${contextWindow} tokens, one of them for the reply)`,
    );
    this.compactable = opts.compactable ?? true;
    this.lowerBound = opts.lowerBound ?? false;
    if (!this.compactable) this.code = "prompt_exceeds_window";
  }
}

/** A request field has the wrong type or value. `param` names the field. */
export class ValidationError extends FlintError {
  override readonly status: number = 400;
  override readonly code: string = "invalid_request_error";
  constructor(message: string, readonly param: string | null = null) {
    super(message);
  }
}

/** No WebGPU adapter, a missing feature, a lost device, or an allocation the GPU refused. */
export class DeviceError extends FlintError {
  override readonly status = 503;
  override readonly code = "device_error";
}

/** The request would need more GPU memory (KV pages) than the pool can give right now. */
export class CapacityError extends FlintError {
  override readonly status = 503;
  override readonly code = "capacity_exceeded";
}

/** A kernel was called with shapes that do not fit together. A programming error, quoted with shapes. */
export class ShapeError extends FlintError {
  override readonly code = "shape_error";
}

/** The client went away or asked to stop. */
export class CancelledError extends FlintError {
  override readonly status = 499;
  override readonly code = "cancelled";
}

/** A route, model or model folder that does not exist. */
export class NotFoundError extends FlintError {
  override readonly status = 404;
  override readonly code: string = "not_found";
  constructor(message: string, code = "not_found") {
    super(message);
    this.code = code;
  }
}

/** A missing or wrong API key. */
export class AuthenticationError extends FlintError {
  override readonly status = 401;
  override readonly code = "invalid_api_key";
}

/** Allowed caller, forbidden target (a model path outside the models directory). */
export class PermissionError extends FlintError {
  override readonly status = 403;
  override readonly code = "permission_denied";
}

/** The request conflicts with work in progress (a model swap is already running). */
export class ConflictError extends FlintError {
  override readonly status = 409;
  override readonly code = "conflict";
}

/** The request body is over the server's size limit. */
export class PayloadTooLargeError extends FlintError {
  override readonly status = 413;
  override readonly code = "request_too_large";
}

/** The request line's URL is over the server's limit. */
export class UriTooLongError extends FlintError {
  override readonly status = 414;
  override readonly code = "uri_too_long";
}

/** The request's headers are over the server's limit. */
export class HeadersTooLargeError extends FlintError {
  override readonly status = 431;
  override readonly code = "request_header_fields_too_large";
}
