/**
 * Qwen3.5 / 3.6 as released (HF `Qwen3_5ForConditionalGeneration`, model_type `qwen3_5`; mlx-lm
 * `models/qwen3_5.py` `Model`): a vision-language wrapper read as its text model, `qwen3_5_text`. The text
 * config is `text_config` (mlx-lm also accepts it flat), the quantization block stays at the top level, and
 * the weights are the text model's under the wrapper's names (src/loader/nested.ts); vision weights are never
 * read.
 * @module
 */
import { LoaderError } from "../errors.ts";
import { readQuant } from "../loader/config.ts";
import { renamedSource, wrappedNames } from "../loader/nested.ts";
import type { ArchConfig, Architecture } from "./model.ts";
import { qwen3_5_text } from "./qwen3_5_text.ts";

/** Architecture `outer` (a multimodal wrapper) read as its text model `inner`. */
export function textModelOf<C extends ArchConfig, W>(
  outer: string,
  inner: Architecture<C, W>,
): Architecture<C, W> {
  return {
    modelType: outer,
    parseConfig(c) {
      const t = c.obj("text_config") ?? c;
      const type = t === c ? inner.modelType : t.json.model_type ?? inner.modelType;
      if (type !== inner.modelType) {
        throw new LoaderError(
          t.file,
          "model_type",
          `${JSON.stringify(type)}: the text model of a ${outer} checkpoint is ${inner.modelType}`,
        );
      }
      const config = inner.parseConfig(t);
      return { ...config, modelType: inner.modelType, quant: readQuant(c) ?? config.quant };
    },
    loadWeights: (l, c) => inner.loadWeights(renamedSource(l, wrappedNames(l)), c),
    forward: (g, w, c) => inner.forward(g, w, c),
  };
}

export const qwen3_5 = textModelOf("qwen3_5", qwen3_5_text);
