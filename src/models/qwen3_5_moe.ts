/**
 * Qwen3.5 / 3.6 MoE as released (HF `Qwen3_5MoeForConditionalGeneration`, model_type `qwen3_5_moe`; mlx-lm
 * `models/qwen3_5_moe.py`): the vision-language wrapper read as its text model, `qwen3_5_moe_text` (see
 * qwen3_5.ts). Its HF experts are fused stacks (`experts.gate_up_proj`), which the loader reads as they are.
 * @module
 */
import { textModelOf } from "./qwen3_5.ts";
import { qwen3_5_moe_text } from "./qwen3_5_moe_text.ts";

export const qwen3_5_moe = textModelOf("qwen3_5_moe", qwen3_5_moe_text);
