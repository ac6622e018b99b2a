#!/usr/bin/env bash
# Prefill attention on matrix units (wgsl/attention_prefill_sgmat.wgsl, bench/NOTES.md #128) on a GPU where
# Dawn offers f16 subgroup matrices: lab checks against the float64 reference (the shapes of
# test/ops/attention_matrix_test.ts, here without vitest: odd shapes, GQA 1–8, q8 cache, windows, rescaled on
# every new max or at the profile's margin), its GPU time beside the FMA kernel's at the 4B shape (lab,
# timestamps and wall clock: Dawn's timestamps read this kernel 2.6× slow, #130), the model's logits with it
# off and on and in 48-row chunks (attention_ab.ts), then the 4B end to end on Dawn with it on (three runs)
# and off (one). On the lent H200: source .device/setup.sh, unpack dawn.node, FLINT_DAWN_NODE=..., then this.
# ATTENTION_E2E=0 stops before the end-to-end runs.
set -u
keep() { grep -Ev 'deprecated|subgroupMatrix|^:[0-9]|warning|^$|Compilation log|^\s*\^'; }
L="deno task kernel --no-probe --webgpu dawn"
K=wgsl/attention_prefill_sgmat.wgsl
for s in S=45,p0=37,nq=6,nkv=2,ps=16,row0=2 S=130,p0=0,nq=32,nkv=8 S=77,p0=1000,nq=16,nkv=8,ps=32,qspread=1 \
  S=200,p0=300,nq=8,nkv=8,ps=7,window=100 S=100,p0=500,nq=32,nkv=4,kv8=1 \
  S=64,p0=64,nq=8,nkv=2,row0=3,kv8=1,window=33 S=1,p0=900,nq=4,nkv=1 S=300,p0=1700,nq=12,nkv=4,qspread=1; do
  for r in 1 0; do
    echo "$s,rescale=$r: $($L $K --small --shape $s,rescale=$r 2>&1 | keep | grep -E "^  out|rror" | cut -c1-120)"
  done
done
for p0 in 0 16384; do
  for k in attention_prefill_quad attention_prefill_sgmat; do
    for w in "" --wall; do
      echo "$k S=2048 p0=$p0 $w: $($L wgsl/$k.wgsl --no-check --iters 5 --shape S=2048,p0=$p0 $w 2>&1 | keep |
        grep -E "^time|rror" | tr -s ' ')"
    done
  done
done
deno run -A bench/experiments/attention_ab.ts --synthetic qwen3-0.6b --tokens 3000 --chunk 48 2>&1 | keep |
  grep -E "matrixUnits|Δ|chunks|rror"
[ "${ATTENTION_E2E:-1}" = 1 ] || exit 0
B="deno task bench --synthetic qwen3-4b --skip kernels,probes --out /tmp --webgpu dawn --json /tmp/b.json"
for a in "--runs 3" "--runs 1 --profile {\"prefillAttention\":{\"matrixUnits\":false}}"; do
  $B $a > /dev/null 2>&1
  echo "$a: $(deno eval "const e = JSON.parse(Deno.readTextFileSync('/tmp/b.json')).models[0].e2e;
    const r = (f) => f.runs.map(Math.round).join('/');
    console.log([...e.prefill.map((p) => p.tokens + ': ' + r(p.tps) + ' tok/s TTFT ' + r(p.ttftMs)),
      ...e.prefillAtDepth.map((p) => 'at ' + p.from + '-' + p.to + ': ' + r(p.tps)),
      ...e.decode.map((d) => 'decode ' + d.depth + ': ' + r(d.tps))].join('; '))" 2>&1 | tail -1)"
done
