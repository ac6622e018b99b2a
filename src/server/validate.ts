/**
 * Request bodies: size limit, strict UTF-8, JSON, and typed field readers. Every failure is a
 * ValidationError (or PayloadTooLargeError) naming the field, so app.ts's one error handler can answer it.
 * @module
 */
import { PayloadTooLargeError, ValidationError } from "../errors.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Reads a JSON object body of at most `limit` bytes. */
export async function readJsonBody(req: Request, limit: number): Promise<Record<string, unknown>> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (declared > limit) {
    throw new PayloadTooLargeError(`request body of ${declared} bytes is over the ${limit}-byte limit`);
  }
  if (!req.body) throw new ValidationError("the request body is empty; expected a JSON object");
  const parts: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch {
      // The client sent less than it declared and stopped (or the connection broke mid-body).
      throw new ValidationError(
        `the request body ended early${Number.isFinite(declared) ? ` (${size} of ${declared} bytes)` : ""}`,
      );
    }
    const { done, value } = chunk;
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new PayloadTooLargeError(`request body is over the ${limit}-byte limit`);
    }
    parts.push(value);
  }
  const bytes = new Uint8Array(size);
  let off = 0;
  for (const p of parts) {
    bytes.set(p, off);
    off += p.length;
  }
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new ValidationError("the request body is not valid UTF-8");
  }
  if (!text.trim()) throw new ValidationError("the request body is empty; expected a JSON object");
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(`the request body is not valid JSON (${(e as Error).message})`);
  }
  if (!isObject(v)) throw new ValidationError("the request body must be a JSON object");
  return v;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function typeName(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

/** Typed access to the fields of one JSON object; errors name the field by its path (`messages[2].role`). */
export class Fields {
  constructor(readonly o: Record<string, unknown>, readonly path = "") {}

  static of(v: unknown, path: string): Fields {
    if (!isObject(v)) throw new ValidationError(`${path} must be an object, got ${typeName(v)}`, path);
    return new Fields(v, path);
  }

  p(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  has(key: string): boolean {
    return this.o[key] !== undefined && this.o[key] !== null;
  }

  raw(key: string): unknown {
    return this.o[key];
  }

  #bad(key: string, want: string): never {
    throw new ValidationError(`${this.p(key)} must be ${want}, got ${typeName(this.o[key])}`, this.p(key));
  }

  string(key: string, opts: { nonEmpty?: boolean } = {}): string {
    const v = this.o[key];
    if (typeof v !== "string") this.#bad(key, "a string");
    if (opts.nonEmpty && !v) throw new ValidationError(`${this.p(key)} must not be empty`, this.p(key));
    return v;
  }
  optString(key: string): string | undefined {
    return this.has(key) ? this.string(key) : undefined;
  }

  number(key: string, opts: { min?: number; max?: number; integer?: boolean } = {}): number {
    const v = this.o[key];
    if (typeof v !== "number" || !Number.isFinite(v)) {
      this.#bad(key, opts.integer ? "an integer" : "a number");
    }
    if (opts.integer && !Number.isInteger(v)) this.#bad(key, "an integer");
    if ((opts.min !== undefined && v < opts.min) || (opts.max !== undefined && v > opts.max)) {
      const range = opts.max === undefined
        ? `≥ ${opts.min}`
        : opts.min === undefined
        ? `≤ ${opts.max}`
        : `in [${opts.min}, ${opts.max}]`;
      throw new ValidationError(`${this.p(key)} must be ${range}, got ${v}`, this.p(key));
    }
    return v;
  }
  optNumber(key: string, opts: { min?: number; max?: number; integer?: boolean } = {}): number | undefined {
    return this.has(key) ? this.number(key, opts) : undefined;
  }

  optBool(key: string): boolean | undefined {
    if (!this.has(key)) return undefined;
    const v = this.o[key];
    if (typeof v !== "boolean") this.#bad(key, "a boolean");
    return v;
  }

  array(key: string, opts: { nonEmpty?: boolean } = {}): unknown[] {
    const v = this.o[key];
    if (!Array.isArray(v)) this.#bad(key, "an array");
    if (opts.nonEmpty && !v.length) {
      throw new ValidationError(`${this.p(key)} must not be empty`, this.p(key));
    }
    return v;
  }
  optArray(key: string): unknown[] | undefined {
    return this.has(key) ? this.array(key) : undefined;
  }

  object(key: string): Fields {
    return Fields.of(this.o[key], this.p(key));
  }
  optObject(key: string): Fields | undefined {
    return this.has(key) ? this.object(key) : undefined;
  }

  oneOf<T extends string>(key: string, values: readonly T[]): T {
    const v = this.string(key);
    if (!values.includes(v as T)) {
      throw new ValidationError(
        `${this.p(key)} must be one of ${values.map((x) => `"${x}"`).join(", ")}, got "${v}"`,
        this.p(key),
      );
    }
    return v as T;
  }
}

/** `stop` / `stop_sequences`: a string or an array of non-empty strings. */
export function readStops(f: Fields, key: string, max = 16): string[] {
  if (!f.has(key)) return [];
  const v = f.raw(key);
  const list = typeof v === "string" ? [v] : Array.isArray(v) ? v : null;
  if (!list) throw new ValidationError(`${f.p(key)} must be a string or an array of strings`, f.p(key));
  if (list.length > max) {
    throw new ValidationError(`${f.p(key)} has ${list.length} entries; at most ${max}`, f.p(key));
  }
  for (const [i, s] of list.entries()) {
    if (typeof s !== "string" || !s) {
      throw new ValidationError(`${f.p(key)}[${i}] must be a non-empty string`, `${f.p(key)}[${i}]`);
    }
  }
  return list as string[];
}

/** A JSON Schema for tool arguments: must be an object (with `type: "object"` when a type is given). */
export function readSchema(
  f: Fields,
  key: string,
  required: boolean,
  opts: { objectRoot?: boolean } = {},
): Record<string, unknown> {
  if (!f.has(key)) {
    if (required) throw new ValidationError(`${f.p(key)} is required (a JSON Schema object)`, f.p(key));
    return { type: "object", properties: {} };
  }
  const v = f.raw(key);
  if (!isObject(v)) {
    throw new ValidationError(`${f.p(key)} must be a JSON Schema object, got ${typeName(v)}`, f.p(key));
  }
  if (opts.objectRoot !== false && v.type !== undefined && v.type !== "object") {
    throw new ValidationError(
      `${f.p(key)}.type must be "object" (tool arguments are an object), got ${JSON.stringify(v.type)}`,
      f.p(key),
    );
  }
  return v;
}
