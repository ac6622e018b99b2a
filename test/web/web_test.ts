/**
 * The playground (model in the tab) and kernel lab in a real browser: headless Chromium (SwiftShader WebGPU:
 * subgroups, no shader-f16, so the f32 path runs). The playground is served from the static build
 * (`buildWeb`, as any static host would), the lab from the server's web routes. Screenshots go to
 * test/artifacts/. The playground against a running server: remote_test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Browser, BrowserContext } from "playwright-core";
import { webRoutes } from "../../src/server/web_routes.ts";
import { buildWeb } from "../../web/build.ts";
import {
  ARTIFACTS,
  launchChromium,
  open,
  type ProgressState,
  recordProgress,
  ROOT,
  serve,
  staticServer,
  urlOf,
} from "./browser.ts";

const MODEL = `${ROOT}models/flint-coder-19m-mlx-4bit`;
const golden: { prompt: string; prompt_ids: number[]; greedy_ids: number[] }[] = JSON.parse(
  Deno.readTextFileSync(`${MODEL}/golden.json`),
);
// The chat prompt of golden.json: the playground must render the same template around the user's text.
const CHAT = golden.find((g) => g.prompt.startsWith("<|im_start|>user\n"))!;
const USER_TEXT = CHAT.prompt.slice("<|im_start|>user\n".length, CHAT.prompt.indexOf("<|im_end|>"));

let browser: Browser;
let site: Deno.HttpServer<Deno.NetAddr>; // static build
let server: Deno.HttpServer<Deno.NetAddr>; // the server's web routes
let dist: string;

beforeAll(async () => {
  dist = await Deno.makeTempDir({ prefix: "flint-web-" });
  await Deno.mkdir(ARTIFACTS, { recursive: true });
  const files = await buildWeb(dist, { minify: true });
  expect(files).toEqual(
    expect.arrayContaining(["app.js", "index.html", "lab.html", "style.css", "wgsl/lib/common.wgsl"]),
  );
  site = staticServer(dist);
  server = serve(webRoutes().fetch);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await site?.shutdown();
  await server?.shutdown();
  if (dist) await Deno.remove(dist, { recursive: true });
});

/** A fresh profile (empty IndexedDB). Waits are long: CI runs this beside other GPU tests on 2 cores. */
async function context(): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  ctx.setDefaultTimeout(300_000);
  return ctx;
}

describe("the server's web routes", () => {
  test("serve the pages, the bundle and the shaders, and nothing outside wgsl/", async () => {
    const base = urlOf(server);
    const get = (p: string) =>
      fetch(base + p).then(async (r) => ({
        status: r.status,
        type: r.headers.get("content-type"),
        text: await r.text(),
      }));
    const index = await get("");
    expect(index.status).toBe(200);
    expect(index.text).toContain('id="folder-input"');
    expect((await get("lab")).text).toContain('data-page="lab"');
    const app = await get("app.js");
    expect(app.type).toContain("javascript");
    expect(app.text).toContain("Scheduler");
    expect((await get("wgsl/rms_norm.wgsl")).text).toContain("fn main");
    expect((await get("wgsl/lib/common.wgsl")).status).toBe(200);
    expect((await get("wgsl/..%2Fdeno.json")).status).toBe(404);
    expect((await get("wgsl/nope.wgsl")).status).toBe(404);
  });
});

describe("playground (static build)", () => {
  test("without WebGPU the page says so and offers the server instead", async () => {
    const ctx = await context();
    await ctx.addInitScript(() => delete (Navigator.prototype as any).gpu);
    const { page, errors } = await open(ctx, urlOf(site));
    await page.waitForSelector('.notice.error[data-key="gpu"]');
    expect(await page.textContent('.notice.error[data-key="gpu"]')).toContain("this browser has no WebGPU");
    expect(await page.textContent("#gpu-status")).toBe("no WebGPU");
    expect(errors).toEqual([]);
    await ctx.close();
  });

  test("a folder that is not a model gets the loader's error and is not cached", async () => {
    const dir = await Deno.makeTempDir({ prefix: "not-a-model-" });
    await Deno.copyFile(`${MODEL}/tokenizer_config.json`, `${dir}/tokenizer_config.json`);
    const ctx = await context();
    const { page, errors } = await open(ctx, urlOf(site));
    await page.setInputFiles("#folder-input", dir);
    await page.waitForSelector('.notice.error[data-key="load"]');
    const name = dir.split("/").pop();
    expect(await page.textContent('.notice.error[data-key="load"]')).toContain(
      `${name}/config.json: file not found`,
    );
    expect(await page.textContent("#cached-models")).toContain("No models saved yet.");
    expect(errors).toEqual([]);
    await ctx.close();
    await Deno.remove(dir, { recursive: true });
  });

  test("a folder without tokenizer.json is refused at load, by name, before any weight is read", async () => {
    const dir = await Deno.makeTempDir({ prefix: "no-tokenizer-" });
    for (const f of ["config.json", "model.safetensors", "tokenizer_config.json"]) {
      await Deno.copyFile(`${MODEL}/${f}`, `${dir}/${f}`);
    }
    const ctx = await context();
    await ctx.addInitScript(recordProgress);
    const { page, errors } = await open(ctx, urlOf(site));
    await page.setInputFiles("#folder-input", dir);
    await page.waitForSelector('.notice.error[data-key="load"]');
    const name = dir.split("/").pop();
    expect(await page.textContent('.notice.error[data-key="load"]'))
      .toContain(`${name}/tokenizer.json: file not found`);
    expect(await page.textContent("#cached-models")).toContain("No models saved yet.");
    const states: ProgressState[] = await page.evaluate(() => (globalThis as any).__progress);
    expect(states.filter((s) => s.stage === "weights")).toEqual([]);
    expect(errors).toEqual([]);
    await ctx.close();
    await Deno.remove(dir, { recursive: true });
  });

  test("loads the bundled model from the file input and reproduces golden.json's greedy ids", async () => {
    const ctx = await context();
    await ctx.addInitScript(recordProgress);
    const { page, errors } = await open(ctx, urlOf(site));
    // The bar's states since the last call.
    const progress = (): Promise<ProgressState[]> =>
      page.evaluate(() => (globalThis as any).__progress.splice(0));
    // f32 on SwiftShader: the page must say shader-f16 is missing, and still run.
    await page.waitForSelector('.notice.warn[data-key="f16"]');
    await page.selectOption("#context-window", "512");
    await page.setInputFiles("#folder-input", MODEL);
    await page.waitForFunction(() =>
      document.body.dataset.ready === "true" || document.querySelector(".notice.error")
    );
    expect(await page.$$eval(".notice.error", (n) => n.map((e) => e.textContent))).toEqual([]);
    expect(await page.textContent("#gpu-status")).toContain("flint-coder-19m-mlx-4bit");
    // Validated, then saved in IndexedDB with its size; persistent storage was asked for.
    await page.waitForSelector("#cached-models li.active");
    expect(await page.textContent("#cached-models li.active")).toMatch(/flint-coder-19m-mlx-4bit.*1[12] MB/);
    await page.waitForSelector("#storage-status:not([hidden])");
    expect(await page.textContent("#storage-status"))
      .toMatch(/^(Persistent storage|Not persistent).* used of /);
    // The load showed its stages: weights with a measure, then kernel compilation without one.
    const load = await progress();
    const compiling = load.findIndex((s) => s.stage === "compile");
    expect(compiling, JSON.stringify(load)).toBeGreaterThan(0);
    expect(load[compiling].text).toMatch(/^Compiling kernels for flint-coder-19m-mlx-4bit…/);
    expect(load[compiling].value).toBe(null);
    expect(load.slice(0, compiling).some((s) => s.stage === "weights" && s.value! > 0)).toBe(true);
    expect(load.slice(compiling).some((s) => s.stage === "weights")).toBe(false);

    await page.fill("#temperature", "0");
    await page.fill("#max-tokens", String(CHAT.greedy_ids.length));
    await page.fill("#prompt", USER_TEXT);
    await page.keyboard.press("Enter");
    const reply = page.locator(".msg.assistant").last();
    await page.waitForSelector('.msg.assistant[data-state="done"], .msg.assistant[data-state="error"]');
    expect(await reply.getAttribute("data-state"), (await reply.textContent()) ?? "").toBe("done");
    const ids = (await reply.getAttribute("data-token-ids"))!.split(",").map(Number);
    expect(ids).toEqual(CHAT.greedy_ids);
    const meta = await reply.locator(".meta").textContent();
    expect(meta).toMatch(
      new RegExp(
        `^${CHAT.greedy_ids.length} tokens · [\\d.]+ tok/s · first token \\d+ ms · prompt ` +
          `${CHAT.prompt_ids.length} tokens`,
      ),
    );
    // One chunk holds the whole prompt: the bar moved inside it (estimated), short of 100% until the end.
    const reading = (await progress()).filter((s) => s.stage === "prefill" && s.value !== null);
    expect(reading.some((s) => s.value! > 0 && s.value! < 100), JSON.stringify(reading)).toBe(true);
    const rising = reading.every((s, i) => s.value! < 100 && (i === 0 || s.value! >= reading[i - 1].value!));
    expect(rising, JSON.stringify(reading)).toBe(true);
    console.log(`[web] headless Chromium (SwiftShader, f32): ${meta}`);
    expect(await reply.locator(".codeblock").count()).toBeGreaterThan(0);
    await page.screenshot({ path: `${ARTIFACTS}/playground.png` });
    expect(errors).toEqual([]);

    // A second turn (the history goes along), stopped with Escape once text streams.
    await page.fill("#max-tokens", "300");
    await page.fill("#prompt", "Now add type hints and a docstring.");
    await page.keyboard.press("Enter");
    const second = page.locator(".msg.assistant").nth(1);
    await page.waitForFunction(() =>
      (document.querySelectorAll(".msg.assistant .body")[1]?.textContent ?? "").length > 0
    );
    expect(await page.isVisible("#stop")).toBe(true);
    await page.keyboard.press("Escape");
    await page.waitForFunction(() =>
      (document.querySelectorAll(".msg.assistant")[1] as HTMLElement).dataset.state !== "streaming"
    );
    expect(await second.getAttribute("data-state")).toBe("stopped");
    expect(await second.locator(".meta").textContent()).toContain("stopped");
    expect(await page.isVisible("#send")).toBe(true);

    // A reload loads the saved model from IndexedDB without asking for the folder, and shows the chat.
    await page.reload();
    await page.waitForFunction(() =>
      document.body.dataset.ready === "true" || document.querySelector(".notice.error")
    );
    expect(await page.textContent("#gpu-status")).toContain("flint-coder-19m-mlx-4bit");
    await page.waitForSelector("#chats li.active");
    expect(await page.locator(".msg.user").allTextContents())
      .toEqual([USER_TEXT, "Now add type hints and a docstring."]);
    expect(await page.locator(".msg.assistant").nth(1).getAttribute("data-state")).toBe("stopped");
    // The 8-bit KV cache: choosing it loads the model again with a q8 pool, and a greedy reply completes.
    await page.selectOption("#kv-cache", "q8");
    await page.waitForFunction(() =>
      (document.getElementById("gpu-status")?.textContent ?? "").includes("8-bit KV") ||
      document.querySelector(".notice.error")
    );
    expect(await page.$$eval(".notice.error", (n) => n.map((e) => e.textContent))).toEqual([]);
    const before = await page.locator(".msg.assistant").count();
    await page.fill("#max-tokens", "8");
    await page.fill("#prompt", USER_TEXT);
    await page.keyboard.press("Enter");
    await page.waitForFunction((n) => {
      const m = document.querySelectorAll<HTMLElement>(".msg.assistant")[n];
      return !!m && m.dataset.state !== "streaming";
    }, before);
    const q8reply = page.locator(".msg.assistant").nth(before);
    expect(await q8reply.getAttribute("data-state"), (await q8reply.textContent()) ?? "").toBe("done");
    expect((await q8reply.getAttribute("data-token-ids"))!.split(",").length).toBe(8);
    expect(errors).toEqual([]);

    // Deleting it empties the list.
    page.once("dialog", (d) => d.accept());
    await page.click('#cached-models button[aria-label^="Delete"]');
    await page.waitForSelector("#cached-models li.empty");
    expect(errors).toEqual([]);
    await ctx.close();
  });
});

describe("kernel lab (server routes)", () => {
  test(
    "checks a kernel against its reference and times it; " +
      "an edited wrong shader fails and is not timed",
    async () => {
      const ctx = await context();
      const { page, errors } = await open(ctx, `${urlOf(server)}lab#rms_norm`);
      await page.waitForFunction(() => document.getElementById("gpu-status")!.dataset.kind === "ok");
      expect(await page.textContent("#kernel-title")).toBe("rms_norm.wgsl");
      await page.click("#run");
      await page.waitForSelector(
        '#result:is([data-state="pass"], [data-state="fail"], [data-state="error"])',
      );
      expect(await page.getAttribute("#result", "data-state"), (await page.textContent("#result")) ?? "")
        .toBe(
          "pass",
        );
      expect(Number(await page.getAttribute("#result", "data-ms"))).toBeGreaterThan(0);
      expect(await page.textContent("#result")).toContain("y: ok");
      await page.screenshot({ path: `${ARTIFACTS}/lab.png` });

      // Scaled by 1.01: still compiles, must fail the check (tolerance ≤ 1e-3 relative), and must not be
      // timed.
      const src = await page.inputValue("#source");
      const wrong = src.replace(/inverseSqrt\(/, "1.01 * inverseSqrt(");
      expect(wrong).not.toBe(src);
      await page.fill("#source", wrong);
      await page.focus("#source");
      await page.keyboard.press("Control+Enter");
      await page.waitForSelector(
        '#result:is([data-state="fail"], [data-state="pass"], [data-state="error"])',
      );
      expect(await page.getAttribute("#result", "data-state")).toBe("fail");
      expect(await page.textContent("#result")).toContain("y: FAIL");
      expect(await page.locator("#result table").count()).toBe(0);
      expect(await page.textContent("#edited")).toBe("edited: rms_norm.wgsl");
      expect(errors).toEqual([]);
      await ctx.close();
    },
  );
});
