#!/usr/bin/env bash
# The matrix-unit prefill matmul (wgsl/matmul_sgmat.wgsl) on a GPU where Dawn offers f16 subgroup matrices
# (bench/NOTES.md #115): the lab's checks against the float64 reference on odd shapes, its time beside the
# int8-x kernel on Deno's WebGPU at the 4B's gate|up shape, then the 4B prefill on Dawn with the kernel off
# and on. On the lent H200: source .device/setup.sh, unpack dawn.node, FLINT_DAWN_NODE=..., then this.
set -u
K="deno task kernel wgsl/matmul_sgmat.wgsl --no-probe --webgpu dawn"
# Tint warns on every subgroupMatrixLoad/Store spelling (deprecated builtin): keep the lab's own lines.
keep() { grep -Ev 'deprecated|\^|subgroupMatrix|^:[0-9]|warning|^$|Compilation log'; }
$K --small --iters 0 2>&1 | keep | tail -3
for s in M=37,N=133,K=320,out=add,scale=f16,row0=3,noff=5,pad=2 M=130,N=257,K=2560,w=q4g32,out=f32,shards=3; do
  $K --shape "$s" --iters 0 2>&1 | keep | tail -2
done
$K --shape M=2048,N=19456,K=2560 --iters 20 --no-check 2>&1 | keep | grep -E "time|compute"
deno task kernel wgsl/matmul_tiled_x8.wgsl --no-probe --shape M=2048,N=19456,K=2560 --iters 20 --no-check 2>&1 |
  grep -E "time|compute"
B="deno task bench --webgpu dawn --synthetic qwen3-4b --prompts 512,4096 --depths 0 --decode-tokens 32 --runs 3"
for on in false true; do
  echo "matrixUnits $on"
  $B --skip kernels,probes --profile "{\"matmul\":{\"tiled\":{\"matrixUnits\":$on}}}" 2>&1 | keep |
    grep -E "^\| (prefill|TTFT|decode)"
done
