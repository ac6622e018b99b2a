/**
 * A tiny WGSL preprocessor: `#include "lib/x.wgsl"`, `#define NAME` (no value), `#ifdef NAME`,
 * `#ifndef NAME`, `#if NAME` (defined and truthy), `#elif NAME`, `#else`, `#endif`, and `{{NAME}}` replaced
 * by the define's value. Nothing else: shapes and tile sizes are WGSL `override` constants, so shaders stay
 * readable files and never strings built in TS.
 * @module
 */

export type Defines = Record<string, string | number | boolean>;

/** Expands one shader. `load` returns the text of an included file (already cached by the caller). */
export function preprocess(
  source: string,
  inDefines: Defines,
  load: (name: string) => string,
  file = "<shader>",
): string {
  const defines: Defines = { ...inDefines };
  const out: string[] = [];
  // Each frame: is this branch live, has any branch of the chain been taken, is the parent live.
  const stack: { live: boolean; taken: boolean; parent: boolean }[] = [];
  const live = () => stack.length === 0 || stack[stack.length - 1].live;
  const truthy = (name: string) => name in defines && defines[name] !== false && defines[name] !== 0;
  const lines = source.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const m = /^\s*#(\w+)\s*(.*?)\s*$/.exec(line);
    if (!m) {
      if (live()) out.push(line.replace(/\{\{(\w+)\}\}/g, (_, n) => substitute(n, defines, file, i)));
      continue;
    }
    const [, dir, arg] = m;
    const where = `${file}:${i + 1}`;
    switch (dir) {
      case "include": {
        if (!live()) break;
        const name = /^"(.+)"$/.exec(arg)?.[1];
        if (!name) throw new Error(`${where}: #include needs a quoted file name`);
        out.push(preprocess(load(name), defines, load, name));
        break;
      }
      case "define":
        if (live()) defines[arg] = 1;
        break;
      case "ifdef":
      case "ifndef":
      case "if": {
        const cond = dir === "ifdef" ? arg in defines : dir === "ifndef" ? !(arg in defines) : truthy(arg);
        const parent = live();
        stack.push({ live: parent && cond, taken: cond, parent });
        break;
      }
      case "elif": {
        const top = stack[stack.length - 1];
        if (!top) throw new Error(`${where}: #elif without #if`);
        const cond = !top.taken && truthy(arg);
        top.live = top.parent && cond;
        top.taken ||= cond;
        break;
      }
      case "else": {
        const top = stack[stack.length - 1];
        if (!top) throw new Error(`${where}: #else without #if`);
        top.live = top.parent && !top.taken;
        top.taken = true;
        break;
      }
      case "endif":
        if (!stack.pop()) throw new Error(`${where}: #endif without #if`);
        break;
      default:
        throw new Error(`${where}: unknown directive #${dir}`);
    }
  }
  if (stack.length) throw new Error(`${file}: unterminated #if`);
  return out.join("\n");
}

function substitute(name: string, defines: Defines, file: string, line: number): string {
  if (!(name in defines)) throw new Error(`${file}:${line + 1}: {{${name}}} is not defined`);
  return String(defines[name]);
}
