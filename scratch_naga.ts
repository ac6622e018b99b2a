const a = (await navigator.gpu.requestAdapter())!;
const d = await a.requestDevice({requiredFeatures:["shader-f16"]});
async function tryc(name: string, body: string) {
  d.pushErrorScope("validation");
  const code = `enable f16;\n@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n${body}\n@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) { o[i] = f(vec4<u32>(o[i], o[i+1], o[i+2], o[i+3])); }`;
  const m = d.createShaderModule({code});
  try { await d.createComputePipelineAsync({layout:"auto", compute:{module:m, entryPoint:"main"}}); } catch {}
  const e = await d.popErrorScope();
  console.log(name, e ? "ERR " + e.message.split("\n").filter(l=>l.includes("=")||l.includes("Returning")).join(" | ").slice(0,300) : "ok");
}
await tryc("bitcast-add", `fn f(v: vec4<u32>) -> u32 { let s = bitcast<vec2<f16>>(v.x) + bitcast<vec2<f16>>(v.y); return bitcast<u32>(s); }`);
await tryc("bitcast-ret", `fn g(v: vec4<u32>) -> vec2<f16> { return bitcast<vec2<f16>>(v.x); } fn f(v: vec4<u32>) -> u32 { return bitcast<u32>(g(v)); }`);
await tryc("bitcast-var", `fn g(v: vec4<u32>) -> vec2<f16> { var r: vec2<f16> = bitcast<vec2<f16>>(v.x); r += bitcast<vec2<f16>>(v.y); return r; } fn f(v: vec4<u32>) -> u32 { return bitcast<u32>(g(v)); }`);
await tryc("bitcast-let-typed", `fn g(v: vec4<u32>) -> vec2<f16> { let a: vec2<f16> = bitcast<vec2<f16>>(v.x); let b: vec2<f16> = bitcast<vec2<f16>>(v.y); return a + b; } fn f(v: vec4<u32>) -> u32 { return bitcast<u32>(g(v)); }`);
await tryc("fma-h2", `fn f(v: vec4<u32>) -> u32 { var h = vec2<f16>(0.0h); let q = bitcast<vec2<f16>>((v.x & 0x000f000fu) | 0x64006400u) - vec2<f16>(1032.0h); h = fma(q, bitcast<vec2<f16>>(v.y), h); return bitcast<u32>(h); }`);
await tryc("vec2f32-of-h2", `fn f(v: vec4<u32>) -> u32 { let h = bitcast<vec2<f16>>(v.x); let g = vec2<f32>(h); return u32(g.x + g.y); }`);
await tryc("bitcast-v4h", `fn f(v: vec4<u32>) -> u32 { let h = bitcast<vec4<f16>>(v.xy); let s = h * h; return bitcast<vec2<u32>>(s).x; }`);
await tryc("bitcast-v2h-var-typed-fma", `fn f(v: vec4<u32>) -> u32 { var h: vec2<f16> = vec2<f16>(0.0h); let q: vec2<f16> = bitcast<vec2<f16>>(v.x); h = h + q * q; return bitcast<u32>(h); }`);
await tryc("load-h2-array", `@group(0) @binding(1) var<storage, read> hx: array<vec2<f16>>; fn f(v: vec4<u32>) -> u32 { var h = vec2<f16>(0.0h); h = fma(hx[v.x], hx[v.y], h); return bitcast<u32>(h); }`);
await tryc("pack-unpack-f32", `fn f(v: vec4<u32>) -> u32 { let q = bitcast<f32>((v.x & 0xFu) | 0x4B000000u) - 8388608.0; return u32(q); }`);
