#!/usr/bin/env python3
"""PyTorch baseline for bench/bench.ts: the same shape in bf16 with HF transformers, random weights on CUDA.

Builds the model from a config.json (the synthetic shape's, or a real folder's; its quantization block is
dropped: this is the bf16 model), so nothing is downloaded. Measures, like the Flint side:
  prefill  time to first token of `generate(max_new_tokens=1)` on N random ids -> N / ttft tok/s
  decode   `generate` of T + 1 greedy tokens after a prompt of d ids (d = depth, at least 1); per-token
           timestamps from a streamer (after cuda synchronize); rate over the last T tokens (first excluded)
Median of --runs after --warmup runs. Prints one JSON object on stdout (also on failure: {"error": ...},
exit code 3 when torch/transformers/CUDA are missing).

  python3 bench/baseline_torch.py --config cfg.json --prompts 512,4096 --depths 0,4096 --decode-tokens 128
"""
import argparse
import json
import statistics
import sys
import time


def emit(obj, code=0):
    print(json.dumps(obj), flush=True)
    sys.exit(code)


def ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="path of an HF config.json")
    ap.add_argument("--prompts", type=ints, default=[512, 4096, 16384])
    ap.add_argument("--depths", type=ints, default=[0, 4096, 16384])
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--cache", choices=["static", "dynamic"], default="static",
                    help="KV cache of generate(); static falls back to dynamic if it fails")
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager, flash_attention_2)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward (slow to start)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as e:
        emit({"error": f"torch/transformers not available: {e}"}, 3)
    if not torch.cuda.is_available():
        emit({"error": "CUDA is not available to torch"}, 3)

    with open(a.config) as f:
        cfg = json.load(f)
    for k in ("quantization", "quantization_config", "torch_dtype", "dtype"):
        cfg.pop(k, None)
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    config.eos_token_id = None
    config.bos_token_id = None
    vocab = config.vocab_size

    t0 = time.perf_counter()
    torch.manual_seed(a.seed)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(config, attn_implementation=a.attn)
        except (TypeError, ValueError):
            model = AutoModelForCausalLM.from_config(config)
    torch.set_default_dtype(torch.float32)
    model = model.to(torch.bfloat16).eval()
    if a.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead")
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    gen = torch.Generator(device="cuda").manual_seed(a.seed + 1)

    class Clock:
        """A streamer: put() gets the prompt first, then each new token; stamp after the GPU is done."""

        def __init__(self):
            self.t = []

        def put(self, value):
            torch.cuda.synchronize()
            self.t.append(time.perf_counter())

        def end(self):
            pass

    cache = {"impl": a.cache}

    def generate(n_prompt, n_new, clock=None):
        ids = torch.randint(1, vocab, (1, n_prompt), device="cuda", generator=gen)
        kw = dict(max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False, pad_token_id=0, eos_token_id=None,
                  streamer=clock)
        if cache["impl"] == "static":
            try:
                with torch.inference_mode():
                    return model.generate(ids, cache_implementation="static", **kw)
            except Exception as e:  # older/newer transformers, or a model without static-cache support
                print(f"[baseline] static cache failed ({type(e).__name__}: {e}); using the dynamic cache",
                      file=sys.stderr)
                cache["impl"] = "dynamic"
        with torch.inference_mode():
            return model.generate(ids, **kw)

    def ttft(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = generate(n, 1)
        torch.cuda.synchronize()
        assert out.shape[1] == n + 1
        return time.perf_counter() - t

    def decode(depth, tokens):
        clock = Clock()
        out = generate(max(1, depth), tokens + 1, clock)
        n_new = out.shape[1] - max(1, depth)
        assert n_new == tokens + 1, f"{n_new} new tokens"
        stamps = clock.t[1:]  # [0] is the prompt; [1] the first new token (prefill), excluded below
        return (len(stamps) - 1) / (stamps[-1] - stamps[0])

    prefill_runs = {n: [] for n in a.prompts}
    decode_runs = {d: [] for d in a.depths}
    torch.cuda.reset_peak_memory_stats()
    for run in range(a.warmup + a.runs):
        for n in a.prompts:
            t = ttft(n)
            if run >= a.warmup:
                prefill_runs[n].append(t)
        for d in a.depths:
            # Warm-up decodes are short: the prefill at that depth and a few steps touch every kernel shape.
            r = decode(d, a.decode_tokens if run >= a.warmup else 2)
            if run >= a.warmup:
                decode_runs[d].append(r)
        print(f"[baseline] run {run + 1}/{a.warmup + a.runs} done", file=sys.stderr, flush=True)

    med = statistics.median
    emit({
        "framework": f"torch {torch.__version__}, transformers {transformers.__version__}",
        "device": torch.cuda.get_device_name(0),
        "dtype": "bfloat16",
        "cache": cache["impl"],
        "attn": getattr(model.config, "_attn_implementation", a.attn),
        "compiled": a.compile,
        "load_s": load_s,
        "params": sum(p.numel() for p in model.parameters()),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(),
        "prefill": [{"tokens": n, "ttft_ms": 1000 * med(v), "tps": n / med(v), "runs_ms": [1000 * x for x in v]}
                    for n, v in prefill_runs.items()],
        "decode": [{"depth": d, "tps": med(v), "runs": v} for d, v in decode_runs.items()],
    })


if __name__ == "__main__":
    main()
