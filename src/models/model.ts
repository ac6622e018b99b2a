/**
 * What an architecture file provides. Each file is named after the HF `model_type`, reads its config from
 * `config.json`, loads weights by their HF names, and writes `forward` over the StepGraph op vocabulary
 * (embed, normLinear, linear, attention, normSwiGLU, logits) — it never touches GPUDevice or byte offsets.
 * @module
 */
import type { ConfigReader, QuantConfig, RopeConfig } from "../loader/config.ts";
import type { WeightSource } from "../loader/weights.ts";
import type { Dims } from "../engine/resources.ts";
import type { StepGraph } from "../engine/step.ts";

export interface ArchConfig {
  modelType: string;
  dims: Dims;
  rope: RopeConfig;
  maxPosition: number;
  quant: QuantConfig | null;
}

export interface Architecture<C extends ArchConfig = ArchConfig, W = unknown> {
  modelType: string;
  parseConfig(c: ConfigReader): C;
  loadWeights(l: WeightSource, c: C): Promise<W>;
  forward(g: StepGraph, w: W, c: C): Promise<void>;
}
