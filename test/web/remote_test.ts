/**
 * The playground in Server mode against the real server (`src/cli/serve.ts --api-key KEY --cors ORIGIN`),
 * in headless Chromium: the API key form on a 401, prompt progress inside one prefill chunk (from a static
 * copy of the playground on another origin), token counts taken from the server's usage, and conversations
 * kept across reloads. Server behaviour relied on: `/` served without the key while the API needs it;
 * `/events?id=N` with estimated prefill events; `--cors` exposing `flint-sequence-id`.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { STATIC_FILES } from "../../web/build.ts";
import {
  ARTIFACTS,
  type FlintServer,
  launchChromium,
  open,
  type ProgressState,
  recordProgress,
  ROOT,
  startFlintServer,
  staticServer,
  urlOf,
} from "./browser.ts";

const KEY = `key-${crypto.randomUUID()}`;

let browser: Browser;
let server: FlintServer;
let site: Deno.HttpServer<Deno.NetAddr>; // the playground's files on another origin
let dist: string;

beforeAll(async () => {
  dist = await Deno.makeTempDir({ prefix: "flint-web-remote-" });
  await Deno.mkdir(ARTIFACTS, { recursive: true });
  site = staticServer(dist);
  const origin = urlOf(site).replace(/\/$/, "");
  server = await startFlintServer(["--context-window", "2048", "--api-key", KEY, "--cors", origin]);
  // The static build's files, with app.js as the server bundled it (one bundling instead of two).
  for (const f of STATIC_FILES) await Deno.copyFile(`${ROOT}web/${f}`, `${dist}/${f}`);
  const app = await fetch(`${server.url}app.js`);
  expect(app.status, server.log()).toBe(200);
  await Deno.writeTextFile(`${dist}/app.js`, await app.text());
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await site?.shutdown();
  await server?.stop();
  if (dist) await Deno.remove(dist, { recursive: true });
});

/**
 * A fresh profile; `withKey` starts it in Server mode with the key kept for the server (and, from another
 * origin, the server's URL set), as a returning user would have it.
 */
async function context(withKey: boolean): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  ctx.setDefaultTimeout(300_000);
  await ctx.addInitScript(recordProgress);
  if (withKey) {
    await ctx.addInitScript(({ url, key }) => {
      try {
        const origin = new URL(url).origin;
        localStorage.setItem("flint.mode", "remote");
        if (location.origin !== origin) localStorage.setItem("flint.server-url", url);
        localStorage.setItem(`flint.api-key@${origin}`, key);
      } catch { /* about:blank */ }
    }, { url: server.url, key: KEY });
  }
  return ctx;
}

const connected = (page: Page) => page.waitForFunction(() => document.body.dataset.ready === "true");

/** Sends `text` and waits until the reply has ended; returns it. */
async function ask(page: Page, text: string, maxTokens: number) {
  const n = await page.locator(".msg.assistant").count();
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", String(maxTokens));
  await page.fill("#prompt", text);
  await page.keyboard.press("Enter");
  await page.waitForFunction((i) => {
    const m = document.querySelectorAll<HTMLElement>(".msg.assistant")[i];
    return !!m && m.dataset.state !== "streaming";
  }, n);
  return page.locator(".msg.assistant").nth(n);
}

describe("playground against the server", () => {
  test("a 401 brings up the key form; the key is kept and the connection retried; clearing it", async () => {
    const ctx = await context(false);
    const { page, errors } = await open(ctx, server.url);
    // No saved mode and no saved model: the page finds the server (a 401 still means one is there).
    await page.waitForSelector("form.keyform");
    expect(await page.getAttribute('[data-mode="remote"]', "aria-checked")).toBe("true");
    expect(await page.textContent("form.keyform")).toContain("needs an API key");
    await page.fill("#key-input", "wrong");
    await page.keyboard.press("Enter");
    await page.waitForSelector("form.keyform >> text=rejected");
    await page.fill("#key-input", KEY);
    await page.keyboard.press("Enter");
    await connected(page);
    expect(await page.textContent("#gpu-status")).toContain("flint-coder-19m-mlx-4bit");
    expect(await page.locator("form.keyform").count()).toBe(0);
    expect(await page.inputValue("#api-key")).toBe(KEY);
    const origin = new URL(server.url).origin;
    expect(await page.evaluate((o) => localStorage.getItem(`flint.api-key@${o}`), origin)).toBe(KEY);

    // Kept: a reload connects without asking.
    await page.reload();
    await connected(page);
    expect(await page.locator("form.keyform").count()).toBe(0);

    // Cleared in the settings: forgotten, and the form is back.
    await page.fill("#api-key", "");
    await page.press("#api-key", "Tab");
    await page.waitForSelector("form.keyform");
    expect(await page.evaluate((o) => localStorage.getItem(`flint.api-key@${o}`), origin)).toBe(null);
    expect(errors).toEqual([]);
    await ctx.close();
  });

  test("from another origin, the bar moves inside a prompt read in one chunk (/events?id=N)", async () => {
    const ctx = await context(true);
    const { page, errors } = await open(ctx, urlOf(site));
    const feeds: string[] = [];
    page.on("request", (r) => r.url().includes("/events") && feeds.push(r.url()));
    await connected(page);
    await page.evaluate(() => (globalThis as any).__progress.splice(0));
    // ~500 tokens: one chunk (the server's chunks are 512 and 2048 rows), long enough for a software GPU.
    const long = Array.from({ length: 250 }, (_, i) => `x${i % 97}`).join(" ");
    const reply = await ask(page, long, 1);
    expect(await reply.getAttribute("data-state"), (await reply.textContent()) ?? "").toBe("done");
    const promptTokens = Number(await reply.getAttribute("data-prompt-tokens"));
    expect(promptTokens).toBeGreaterThan(400);
    expect(promptTokens).toBeLessThanOrEqual(512);
    expect(feeds.length).toBe(1);
    expect(feeds[0]).toMatch(new RegExp(`^${server.url}events\\?id=\\d+$`));
    const states: ProgressState[] = await page.evaluate(() => (globalThis as any).__progress);
    const reading = states.filter((s) => s.stage === "prefill" && s.value !== null);
    expect(reading.some((s) => s.value! > 0 && s.value! < 100), JSON.stringify(states)).toBe(true);
    expect(reading.every((s, i) => s.value! < 100 && (i === 0 || s.value! >= reading[i - 1].value!))).toBe(
      true,
    );
    expect(reading.some((s) => s.text.startsWith("Reading the prompt: about "))).toBe(true);
    expect(errors).toEqual([]);
    await ctx.close();
  });

  test("stats are the server's token counts; a stream stopped before its usage has no count", async () => {
    const ctx = await context(true);
    const { page, errors } = await open(ctx, server.url);
    await connected(page);
    const sent = page.waitForRequest((r) => r.url().endsWith("/v1/chat/completions"));
    // Over one KV page (16 tokens) with the template, so the next turn finds it in the prefix cache.
    const reply = await ask(page, "def fibonacci(n):  # the n-th Fibonacci number, iteratively", 24);
    expect(await reply.getAttribute("data-state"), (await reply.textContent()) ?? "").toBe("done");
    // The same request, not streamed: greedy, so the server counts the same tokens.
    const body = (await sent).postDataJSON();
    expect(body.stream_options).toEqual({ include_usage: true });
    const r = await fetch(`${server.url}v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: false, stream_options: undefined }),
    });
    const usage = (await r.json()).usage;
    expect(Number(await reply.getAttribute("data-completion-tokens"))).toBe(usage.completion_tokens);
    expect(Number(await reply.getAttribute("data-prompt-tokens"))).toBe(usage.prompt_tokens);
    const n = usage.completion_tokens;
    const p = usage.prompt_tokens;
    expect(await reply.locator(".meta").textContent()).toMatch(
      new RegExp(
        `^${n} tokens? · [\\d.]+ tok/s · first token \\d+ ms · ` +
          `(prompt ${p} tokens|\\d+ of ${p} prompt tokens cached)`,
      ),
    );
    // The prefix cache's share, from the streamed usage; the repeat finds the streamed prompt's pages.
    expect(await reply.getAttribute("data-cached-tokens")).toMatch(/^\d+$/);
    const cached = Number(await reply.getAttribute("data-cached-tokens"));
    expect(cached).toBeLessThan(p);
    expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(Math.max(cached, 1));
    expect(Number(await reply.getAttribute("data-tps"))).toBeGreaterThan(0);

    // The next turn sends the first as history: the server reads it from its prefix cache, and says so.
    const next = await ask(page, "Now add a docstring.", 2);
    expect(await next.locator(".meta").textContent()).toMatch(/ · [1-9]\d* of \d+ prompt tokens cached/);
    expect(Number(await next.getAttribute("data-cached-tokens"))).toBeGreaterThan(0);

    // Stopped as soon as text streams: the server sends no usage, so no count is made up.
    await page.fill("#max-tokens", "1500");
    await page.fill("#prompt", "Write a long Python module with many classes and functions.");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() =>
      (document.querySelectorAll(".msg.assistant .body")[2]?.textContent ?? "").length > 0
    );
    await page.keyboard.press("Escape");
    const second = page.locator(".msg.assistant").nth(2);
    await page.waitForFunction(() =>
      (document.querySelectorAll(".msg.assistant")[2] as HTMLElement).dataset.state !== "streaming"
    );
    expect(await second.getAttribute("data-state")).toBe("stopped");
    expect(await second.locator(".meta").textContent()).toMatch(/^token count unknown · .*stopped$/);
    expect(await second.getAttribute("data-completion-tokens")).toBe("");
    await page.screenshot({ path: `${ARTIFACTS}/playground_server.png` });
    expect(errors).toEqual([]);
    await ctx.close();
  });

  test("conversations survive a reload, per mode, and can be switched and deleted", async () => {
    const ctx = await context(true);
    const { page, errors } = await open(ctx, server.url);
    const users = () => page.locator(".msg.user").allTextContents();
    const titles = () => page.locator("#chats .chat-item .name").allTextContents();
    await connected(page);
    const first = await ask(page, "What is a closure?", 4);
    const stats = await first.locator(".meta").textContent();
    await page.waitForSelector("#chats li.active");
    expect(await titles()).toEqual(["What is a closure?"]);

    await page.reload();
    await connected(page);
    await page.waitForSelector("#chats li.active");
    expect(await users()).toEqual(["What is a closure?"]);
    expect(await page.locator(".msg.assistant .meta").textContent()).toBe(stats);

    await page.click("#new-chat");
    await page.waitForFunction(() => !document.querySelector(".msg, #chats li.active"));
    await ask(page, "And a generator?", 4);
    await page.waitForFunction(() => document.querySelectorAll("#chats li").length === 2);
    expect(await titles()).toEqual(["And a generator?", "What is a closure?"]);
    await page.click('#chats .chat-item[title="What is a closure?"]');
    await page.waitForFunction(() =>
      document.querySelector("#chats li.active .name")?.textContent === "What is a closure?"
    );
    expect(await users()).toEqual(["What is a closure?"]);

    page.once("dialog", (d) => d.accept());
    await page.click('#chats button[aria-label="Delete chat And a generator?"]');
    await page.waitForFunction(() => document.querySelectorAll("#chats li:not(.empty)").length === 1);
    expect(await users()).toEqual(["What is a closure?"]);

    // Per mode: the tab's model has its own (empty) list; back in Server mode the chat is there again.
    await page.click('[data-mode="local"]');
    await page.waitForSelector("#chats li.empty");
    expect(await users()).toEqual([]);
    await page.click('[data-mode="remote"]');
    await page.waitForSelector("#chats li.active");
    expect(await users()).toEqual(["What is a closure?"]);

    // Deleting the chat shown leaves a new, empty one, also after a reload.
    page.once("dialog", (d) => d.accept());
    await page.click('#chats button[aria-label="Delete chat What is a closure?"]');
    await page.waitForSelector("#chats li.empty");
    expect(await users()).toEqual([]);
    await page.reload();
    await connected(page);
    await page.waitForSelector("#chats li.empty");
    expect(await users()).toEqual([]);
    expect(errors).toEqual([]);
    await ctx.close();
  });
});
