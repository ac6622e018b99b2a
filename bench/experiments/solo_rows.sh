#!/usr/bin/env bash
# A prompt alone in 4096-row prefill steps on matrix units (the profile's matmul.tiled.matrixSoloRows,
# bench/NOTES.md #129) beside 2048-row ones and beside Deno's WebGPU (the FMA path), the 4B shape, one call:
# `deno task bench` three times into OUT (default /tmp/solo_rows), then one line of figures each. On the
# lent H200: source .device/setup.sh, unpack dawn.node, FLINT_DAWN_NODE=..., then this. RUNS=3 by default.
set -u
OUT=${OUT:-/tmp/solo_rows}
mkdir -p "$OUT"
B="deno task bench --synthetic qwen3-4b --skip kernels,probes --out $OUT --runs ${RUNS:-3}"
$B --webgpu dawn --name dawn > "$OUT/dawn.log" 2>&1
$B --webgpu dawn --name dawn_2048 --profile '{"matmul":{"tiled":{"matrixSoloRows":2048}}}' \
  > "$OUT/dawn_2048.log" 2>&1
$B --webgpu deno --name deno > "$OUT/deno.log" 2>&1
for n in dawn dawn_2048 deno; do
  echo "$n: $(deno eval "const m = JSON.parse(Deno.readTextFileSync('$OUT/$n.json')).models[0];
    const e = m.e2e, r = (f) => f.runs.map(Math.round).join('/');
    console.log([...e.prefill.map((p) => p.tokens + ': ' + r(p.tps) + ' tok/s TTFT ' + r(p.ttftMs)),
      ...e.prefillAtDepth.map((p) => 'at ' + p.from + '-' + p.to + ': ' + r(p.tps)),
      ...e.decode.map((d) => 'decode ' + d.depth + ': ' + r(d.tps)),
      'activations MiB ' + Math.round(m.memory.activations / 2 ** 20) + ', peak ' + Math.round(m.memory.peak / 2 ** 20)].join('; '))" 2>&1 | tail -1)"
done
