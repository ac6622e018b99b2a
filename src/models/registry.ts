/**
 * `model_type` → architecture. Adding one is a new file named after the HF `model_type` plus a line here.
 * @module
 */
import { UnsupportedModelError } from "../errors.ts";
import { llama } from "./llama.ts";
import type { Architecture } from "./model.ts";
import { qwen2 } from "./qwen2.ts";
import { qwen3 } from "./qwen3.ts";

const ARCHS: Record<string, Architecture<any, any>> = { llama, qwen2, qwen3 };

export const SUPPORTED_MODEL_TYPES: string[] = Object.keys(ARCHS);

export function architectureFor(modelType: unknown, file: string): Architecture<any, any> {
  const a = typeof modelType === "string" ? ARCHS[modelType] : undefined;
  if (!a) throw new UnsupportedModelError(file, String(modelType), SUPPORTED_MODEL_TYPES);
  return a;
}
