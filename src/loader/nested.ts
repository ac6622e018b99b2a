/**
 * Multimodal wrappers around a text model (Qwen3.5 / 3.6 `qwen3_5`, `qwen3_5_moe`): the language model's
 * config sits under `text_config` and its weights under `model.language_model.*` (HF; head `lm_head.*`) or
 * `language_model.model.*` (mlx-lm and mlx-vlm; head `language_model.lm_head.*`), next to a vision tower
 * (`model.visual.*`, `vision_tower.*`) that Flint, serving text only, never reads.
 * @module
 */
import type { WeightRef, WeightSource } from "./weights.ts";

/** Vision tower and projector tensors of the wrappers' HF and MLX layouts. */
const VISION = /^(model\.)?(visual|vision_tower|vision_model|multi_modal_projector)\./;

/** Whether `name` belongs to the vision side of a multimodal checkpoint. */
export function isVisionTensor(name: string): boolean {
  return VISION.test(name);
}

/** The `text_config` block of a wrapper's config.json, or null for a plain text model. */
export function textConfig(config: Record<string, any>): Record<string, any> | null {
  const t = config.text_config;
  return t && typeof t === "object" && !Array.isArray(t) ? t : null;
}

/**
 * mlx-lm's name for a wrapper's tensor (its qwen3_5 `Model.sanitize`): `model.language_model.X` becomes
 * `language_model.model.X`, names already under `language_model.` stay, any other gets that prefix
 * (`lm_head.weight` → `language_model.lm_head.weight`). Vision tensors are not renamed (callers drop them).
 */
export function mlxWrappedName(name: string): string {
  if (name.startsWith("model.language_model.")) {
    return `language_model.model.${name.slice("model.language_model.".length)}`;
  }
  return name.startsWith("language_model.") ? name : `language_model.${name}`;
}

/**
 * Maps the text model's names (`model.X`, `lm_head.X`) to where `l`'s checkpoint keeps them: HF wrapper
 * names, MLX wrapper names, or unchanged for a text-only checkpoint (told apart by the embedding's name).
 */
export function wrappedNames(l: WeightSource): (name: string) => string {
  if (l.has("model.language_model.embed_tokens.weight")) {
    return (n) => (n.startsWith("model.") ? `model.language_model.${n.slice("model.".length)}` : n);
  }
  if (l.has("language_model.model.embed_tokens.weight")) return (n) => `language_model.${n}`;
  return (n) => n;
}

/** `l` seen through a renaming: every tensor or module name an architecture asks for passes `to` first. */
export function renamedSource(l: WeightSource, to: (name: string) => string): WeightSource {
  const ref = (r: WeightRef): WeightRef => (typeof r === "string" ? to(r) : { ...r, path: to(r.path) });
  return {
    has: (name) => l.has(to(name)),
    shape: (name) => l.shape(to(name)),
    linear: (path, N, K) => l.linear(to(path), N, K),
    group: (paths, Ns, K) => l.group(paths.map(ref), Ns, K),
    experts: (at, E, Ns, K) => l.experts({ ...at, prefix: to(at.prefix) }, E, Ns, K),
    vector: (name, n, opts) => l.vector(to(name), n, opts),
    array: (name, shape) => l.array(to(name), shape),
    uploadF32: (label, v) => l.uploadF32(label, v),
  };
}
