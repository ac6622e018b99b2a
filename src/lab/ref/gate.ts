/** Float64 reference of sigmoid_gate.wgsl. @module */

/** y[i] · sigmoid(gate[i]) over equal-length arrays. */
export function sigmoidGateRef(gate: Float64Array, y: Float64Array): Float64Array {
  return y.map((v, i) => v / (1 + Math.exp(-gate[i])));
}
