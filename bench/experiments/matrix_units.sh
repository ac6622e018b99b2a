#!/usr/bin/env bash
# The matrix units on a GPU where Dawn offers f16 subgroup matrices (bench/NOTES.md #115–#127): the prefill
# matmul's (src/ops/matmul_matrix.ts: rows_f16, dequant_f16, matmul_sgmat, matmul_splitk) lab checks against
# the float64 reference on the test's odd shapes, weights dequantized in a pass and inside the GEMM; the
# bundled model's greedy ids and NLL on Dawn beside Deno's WebGPU; the engine's GEMM kernel beside the f16
# GEMM experiment in one harness; the 4B's prefill linears in GPU time (timestamps: Dawn's event-loop stalls,
# #117, do not reach them) on int8 x and on matrix units; then the 4B end to end on Deno and on Dawn (three
# runs each). On the lent H200: source .device/setup.sh, unpack dawn.node, FLINT_DAWN_NODE=..., then this.
set -u
K="deno task kernel wgsl/matmul_sgmat.wgsl --no-probe --webgpu dawn"
# Tint warns on every subgroupMatrixLoad/Store spelling (deprecated builtin): keep the lab's own lines.
keep() { grep -Ev 'deprecated|\^|subgroupMatrix|^:[0-9]|warning|^$|Compilation log'; }
for d in pass fused; do
  for s in w=q4g64,scale=bf16,out=act,M=37,N=133,K=320 \
    w=q4g32,scale=f16,out=f32,M=130,N=257,K=96,splitk=3 \
    w=q4g128,scale=bf16,out=add,M=200,N=129,K=512,row0=3,noff=5,pad=2 \
    w=q4g64,scale=f16,out=act,M=129,N=300,K=2560,shards=3,splitk=1 \
    w=q8g64,scale=bf16,out=f32,M=70,N=200,K=192,bias=1 \
    w=q8g32,scale=f16,out=add,M=131,N=333,K=160,mxblock=128,noff=3,pad=1 \
    w=q4g32,scale=bf16,out=act,M=64,N=390,K=96,mxblock=256,bias=1,shards=2 \
    w=q4g64,scale=bf16,out=f32,M=256,N=384,K=512,splitk=1 \
    w=q4g64,scale=bf16,out=add,M=300,N=2560,K=4096; do
    echo "$d $s: $($K --shape "$s,dequant=$d" --iters 0 2>&1 | keep | grep -E "^  y:|rror" | head -2)"
  done
done
P="def main():\n    print('hello from flint')\n\nfor i in range(10):\n    main()\n"
for w in deno dawn; do
  deno task generate --webgpu $w --prompt "$(printf "$P")" --max-tokens 48 --json 2>/dev/null |
    grep -o '"webgpu[^,]*\|"token_ids":\[[^]]*\]' | tr '\n' ' '
  echo
  deno task eval --webgpu $w --file README.md --json 2>/dev/null | grep -o '"mean_nll":[^,]*'
done
if [ "${MATRIX_UNITS_HARNESS:-1}" = 1 ]; then
  E="deno run -A bench/experiments/sgmat_gemm.ts --cfg 2,2,4,4,32,8 --iters 30"
  for n in 19456 6144; do
    $E --mfast --n $n --sizes 2048,512 2>&1 | grep -E "^unrolled|rror" | head -2
    $E --engine --n $n --sizes 2048,512 2>&1 | grep -E "^engine|rror" | head -2
  done
fi
G="deno run -A bench/experiments/gemm_ab.ts --synthetic qwen3-4b --rows 512,2048 --rounds 3"
$G --webgpu dawn --configs '[{"matrixUnits":false},{}]' 2>&1 | keep | grep -E "median|timing|timestamps"
# MATRIX_UNITS_E2E=0: stop before the end-to-end runs.
[ "${MATRIX_UNITS_E2E:-1}" = 1 ] || exit 0
show() { deno eval "const m = JSON.parse(Deno.readTextFileSync('/tmp/b.json')).models[0]; const e = m.e2e;
    const runs = (f) => f.runs.map(Math.round).join('/');
    console.log([...e.prefill.map((p) => 'prefill ' + p.tokens + ': ' + runs(p.tps) + ' tok/s, TTFT ' +
      runs(p.ttftMs) + ' ms'), ...e.prefillAtDepth.map((p) => 'prefill at ' + p.from + '-' + p.to + ': ' +
      runs(p.tps)), ...e.decode.map((d) => 'decode at ' + d.depth + ': ' + runs(d.tps))].join('\n'))"; }
B="deno task bench --synthetic qwen3-4b --prompts 512,4096,16384 --depths 0,16384 --decode-tokens 32"
B="$B --skip kernels,probes --out /tmp --json /tmp/b.json"
echo deno; $B --runs 3 > /dev/null 2>&1; show
echo dawn; $B --runs 3 --webgpu dawn > /dev/null 2>&1; show
