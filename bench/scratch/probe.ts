import { Gpu } from "../../src/gpu/device.ts";
import { measureCeilings } from "../probes.ts";
const gpu = await Gpu.create();
console.log(gpu.info);
let t = performance.now();
console.log(await measureCeilings(gpu, { quick: true, timer: { targetMs: 50 } }), performance.now() - t);
t = performance.now();
console.log(await measureCeilings(gpu, { quick: true, timer: { targetMs: 50, wall: true } }), performance.now() - t);
console.log(gpu.takeErrors());
