/**
 * `model_type` → architecture. Adding one is a new file named after the HF `model_type` plus a line here.
 * @module
 */
import { UnsupportedModelError } from "../errors.ts";
import { gemma3_text } from "./gemma3_text.ts";
import { lfm2 } from "./lfm2.ts";
import { llama } from "./llama.ts";
import type { Architecture } from "./model.ts";
import { qwen2 } from "./qwen2.ts";
import { qwen3 } from "./qwen3.ts";
import { qwen3_5 } from "./qwen3_5.ts";
import { qwen3_5_moe } from "./qwen3_5_moe.ts";
import { qwen3_5_moe_text } from "./qwen3_5_moe_text.ts";
import { qwen3_5_text } from "./qwen3_5_text.ts";
import { qwen3_moe } from "./qwen3_moe.ts";
import { qwen3_next } from "./qwen3_next.ts";

const ARCHS: Record<string, Architecture<any, any>> = {
  llama,
  qwen2,
  qwen3,
  qwen3_moe,
  qwen3_next,
  qwen3_5_text,
  qwen3_5_moe_text,
  qwen3_5,
  qwen3_5_moe,
  lfm2,
  gemma3_text,
};

export const SUPPORTED_MODEL_TYPES: string[] = Object.keys(ARCHS);

export function architectureFor(modelType: unknown, file: string): Architecture<any, any> {
  const a = typeof modelType === "string" ? ARCHS[modelType] : undefined;
  if (!a) throw new UnsupportedModelError(file, String(modelType), SUPPORTED_MODEL_TYPES);
  return a;
}
