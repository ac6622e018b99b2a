/**
 * Deno-only: Dawn's WebGPU (npm `webgpu`'s Node-API addon, `dawn.node`), the second implementation beside
 * Deno's own (wgpu). Dawn offers subgroup matrices (tensor cores, Apple's simdgroup matrices) and reads
 * buffers back without Deno's ≥ 10 ms wait. `FLINT_DAWN_NODE` names the addon file where the npm package is
 * not installed (it is a dev dependency: the GPU machine's kit carries the one file).
 * @module
 */
import { DeviceError } from "../errors.ts";

/**
 * Dawn toggles: `allow_unsafe_apis` (subgroup matrices are experimental), f16 on NVIDIA's Vulkan driver (Dawn
 * hides it there by default), the Vulkan memory model subgroup matrices need.
 */
export const DAWN_TOGGLES = ["allow_unsafe_apis", "vulkan_enable_f16_on_nvidia", "use_vulkan_memory_model"];

// dawn.node polls its events through the Dawn instance such an object owns: if the GC frees it while a
// device lives, every later mapAsync hangs or crashes. Held for the process's life, one per set of flags.
const instances = new Map<string, GPU>();

/** After this long of back-to-back polls in one wait, polls come this far apart (ms). */
export const POLL_SPIN_MS = 1;
export const POLL_INTERVAL_MS = 1;

let pacing = false;

/**
 * While any map or work-done promise is pending, dawn.node polls Dawn's events by a chain of `setImmediate`
 * calls, each passing a new native function: a Node-API object with a finalizer. A long GPU wait makes
 * ~10^5 of them, and Deno frees such objects in batches at a cost that grows faster than their number
 * (bench/NOTES.md #121): seconds-long stalls of the JS thread. So after POLL_SPIN_MS of one chain its polls
 * are spaced POLL_INTERVAL_MS apart: short waits stay as quick, long ones make a few polls per millisecond.
 * Other callers' `setImmediate` (JS functions) pass through untouched.
 */
export function pacePolls(): void {
  if (pacing) return;
  pacing = true;
  const g = globalThis as unknown as { setImmediate?: Schedule };
  if (typeof g.setImmediate !== "function") return; // dawn.node polls through it: nothing to pace without it
  g.setImmediate = pollPacer(g.setImmediate.bind(globalThis), setTimeout, () => performance.now());
}

type Callback = (...a: unknown[]) => void;
type Schedule = (cb: Callback, ...a: unknown[]) => unknown;

/**
 * The `setImmediate` pacePolls installs, over the given scheduling primitives. A native callback (a
 * Node-API function: dawn.node's poll) queued while no poll runs starts a chain; one queued from inside a
 * poll continues it.
 */
/** Whether `fn` is native code (a Node-API function, a builtin or a bound function), not JS source. */
export function isNativeFunction(fn: unknown): boolean {
  return typeof fn === "function" && Function.prototype.toString.call(fn).includes("[native code]");
}

export function pollPacer(
  immediate: Schedule,
  timeout: (cb: () => void, ms: number) => unknown,
  now: () => number,
): Schedule {
  let inPoll = false;
  let chainStart = 0;
  const run = (cb: Callback, a: unknown[]) => () => {
    inPoll = true;
    try {
      cb(...a);
    } finally {
      inPoll = false;
    }
  };
  return (cb, ...a) => {
    if (!isNativeFunction(cb)) return immediate(cb, ...a);
    const t = now();
    if (!inPoll) chainStart = t;
    if (t - chainStart < POLL_SPIN_MS) return immediate(run(cb, a));
    // Queued from an immediate, not from a timer: nested timers are clamped to 4 ms.
    return immediate(() => timeout(run(cb, a), POLL_INTERVAL_MS));
  };
}

/** Node's name of this platform's addon folder in the npm package (`dist/<name>/dawn.node`). */
function platformDir(): string {
  const os = Deno.build.os === "windows" ? "win32" : Deno.build.os;
  if (os === "darwin") return "darwin-universal";
  return `${os}-${Deno.build.arch === "aarch64" ? "arm64" : "x64"}`;
}

function addonPath(req: { resolve(id: string): string }): string {
  const env = Deno.env.get("FLINT_DAWN_NODE");
  if (env) return env;
  try {
    const index = req.resolve("webgpu");
    return `${index.slice(0, index.lastIndexOf("/"))}/dist/${platformDir()}/dawn.node`;
  } catch {
    return new URL(`../../node_modules/webgpu/dist/${platformDir()}/dawn.node`, import.meta.url).pathname;
  }
}

/**
 * Dawn's `GPU` object (created once per set of flags: DAWN_TOGGLES and `extra`, e.g. `backend=null` for
 * compile-only checks), or a DeviceError saying why the addon did not load.
 */
export async function dawnGpu(extra: string[] = []): Promise<GPU> {
  // FLINT_DAWN_TOGGLES: more toggles to enable, comma-separated (an A/B: disable_robustness, ...).
  const more = Deno.env.get("FLINT_DAWN_TOGGLES")?.split(",").filter(Boolean) ?? [];
  const flags = [
    `enable-dawn-features=${[...DAWN_TOGGLES, ...more].join(",")}`,
    "disable-dawn-features=timestamp_quantization", // timestamps at full resolution
    ...extra,
  ];
  const key = flags.join(" ");
  const held = instances.get(key);
  if (held) return held;
  // node:module by a computed name: a static import makes `deno check` want @types/node.
  const NODE_MODULE = "node:" + "module";
  const { createRequire } = (await import(NODE_MODULE)) as {
    createRequire: (url: string) => ((id: string) => unknown) & { resolve(id: string): string };
  };
  const req = createRequire(import.meta.url);
  const path = addonPath(req);
  try {
    // The addon itself, not the package's index.js: that only patches GPUDevice.destroy() to unmap buffers.
    const addon = req(path) as { create(flags: string[]): GPU };
    const gpu = addon.create(flags);
    instances.set(key, gpu);
    // FLINT_DAWN_POLLING=spin: the addon's own polling (an A/B against pacing).
    if (Deno.env.get("FLINT_DAWN_POLLING") !== "spin") pacePolls();
    return gpu;
  } catch (e) {
    throw new DeviceError(
      `--webgpu dawn: could not load ${path} (${(e as Error).message}); install the npm package ` +
        "`webgpu` (npm install) or set FLINT_DAWN_NODE to its dawn.node",
    );
  }
}
