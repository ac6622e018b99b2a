/**
 * Builds the playground: `deno task build:web [--out DIR] [--no-minify]` writes a static site (default
 * `dist/web/`) that works from any static host: index.html, lab.html, style.css, app.js (the browser
 * bundle of web/main.ts and the engine under src/) and a copy of wgsl/ next to it, which the bundle reads
 * its shaders from. The server (src/server/web_routes.ts) uses `bundleApp` to build app.js on startup.
 * @module
 */

const ROOT = new URL("../", import.meta.url);
/** Static files copied as they are, from web/. */
export const STATIC_FILES = ["index.html", "lab.html", "style.css", "favicon.svg"] as const;

/** Bundles web/main.ts for browsers with `deno bundle`; returns the JavaScript. */
export async function bundleApp(opts: { minify?: boolean } = {}): Promise<string> {
  const args = ["bundle", "--platform", "browser", "--quiet"];
  if (opts.minify) args.push("--minify");
  args.push("web/main.ts");
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`deno bundle web/main.ts failed:\n${stderr}`);
  return new TextDecoder().decode(out.stdout);
}

/** Writes the whole static site into `outDir`; returns the files written (relative). */
export async function buildWeb(outDir: URL | string, opts: { minify?: boolean } = {}): Promise<string[]> {
  const out = typeof outDir === "string" ? outDir.replace(/\/?$/, "/") : outDir.pathname.replace(/\/?$/, "/");
  await Deno.remove(out, { recursive: true }).catch(() => {});
  await Deno.mkdir(`${out}wgsl`, { recursive: true });
  const written: string[] = [];
  await Deno.writeTextFile(`${out}app.js`, await bundleApp(opts));
  written.push("app.js");
  for (const f of STATIC_FILES) {
    await Deno.copyFile(new URL(`web/${f}`, ROOT), `${out}${f}`);
    written.push(f);
  }
  for (const rel of await listWgsl()) {
    const dst = `${out}wgsl/${rel}`;
    await Deno.mkdir(dst.slice(0, dst.lastIndexOf("/")), { recursive: true });
    await Deno.copyFile(new URL(`wgsl/${rel}`, ROOT), dst);
    written.push(`wgsl/${rel}`);
  }
  return written;
}

/** Every .wgsl file under wgsl/, as paths relative to it ("rms_norm.wgsl", "lib/common.wgsl"). */
export async function listWgsl(dir = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(new URL(`wgsl/${dir}`, ROOT))) {
    if (e.isDirectory) out.push(...await listWgsl(`${dir}${e.name}/`));
    else if (e.name.endsWith(".wgsl")) out.push(`${dir}${e.name}`);
  }
  return out.sort();
}

if (import.meta.main) {
  const args = [...Deno.args];
  const minify = !args.includes("--no-minify");
  const i = args.indexOf("--out");
  const out = i >= 0 && args[i + 1] ? args[i + 1] : new URL("dist/web/", ROOT).pathname;
  const t0 = performance.now();
  const files = await buildWeb(out, { minify });
  const kb = Math.round((await Deno.stat(`${out.replace(/\/?$/, "/")}app.js`)).size / 1024);
  console.log(
    `built ${files.length} files into ${out} (app.js ${kb} KB) in ${Math.round(performance.now() - t0)} ms`,
  );
}
