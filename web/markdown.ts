/**
 * Just enough Markdown for model replies, rendered to DOM nodes (never innerHTML, so model output cannot
 * inject markup): fenced code blocks with a copy button and light highlighting, inline code, bold, headings
 * and lists. An unterminated fence (still streaming) renders as code.
 * @module
 */
import { h } from "./dom.ts";

/** Replaces the children of `el` with the rendering of `text`. */
export function renderMarkdown(el: HTMLElement, text: string): void {
  const out: Node[] = [];
  const lines = text.split("\n");
  let para: string[] = [];
  let list: HTMLElement | null = null;
  const flushPara = () => {
    if (para.length) out.push(h("p", {}, ...inline(para.join("\n"))));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*```\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      flushPara();
      list = null;
      const body: string[] = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i]);
      out.push(codeBlock(body.join("\n"), fence[1]));
      continue;
    }
    const head = /^(#{1,4})\s+(.*)$/.exec(line);
    const item = /^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/.exec(line);
    if (head) {
      flushPara();
      list = null;
      out.push(h(`h${Math.min(6, head[1].length + 2)}` as "h3", {}, ...inline(head[2])));
    } else if (item) {
      flushPara();
      const tag = item[1] ? "ol" : "ul";
      if (!list || list.tagName.toLowerCase() !== tag) out.push(list = h(tag, {}));
      list.append(h("li", {}, ...inline(item[2])));
    } else if (!line.trim()) {
      flushPara();
      list = null;
    } else {
      list = null;
      para.push(line);
    }
  }
  flushPara();
  el.replaceChildren(...out);
}

function inline(text: string): Node[] {
  const out: Node[] = [];
  const re = /`([^`\n]+)`|\*\*([^*\n]+)\*\*/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index! > last) out.push(document.createTextNode(text.slice(last, m.index)));
    out.push(m[1] !== undefined ? h("code", {}, m[1]) : h("strong", {}, m[2]));
    last = m.index! + m[0].length;
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

function codeBlock(code: string, lang: string): HTMLElement {
  const copy = h("button", { type: "button", class: "copy", title: "Copy code" }, "Copy");
  copy.addEventListener("click", async () => {
    await navigator.clipboard?.writeText(code).catch(() => {});
    copy.textContent = "Copied";
    setTimeout(() => (copy.textContent = "Copy"), 1200);
  });
  return h(
    "div",
    { class: "codeblock" },
    h("div", { class: "codehead" }, h("span", {}, lang || "code"), copy),
    h("pre", {}, h("code", {}, ...highlight(code))),
  );
}

const KEYWORDS = new Set(
  ("def class return if elif else for while in not and or is import from as with try except finally raise " +
    "lambda yield pass break continue None True False async await function const let var new this typeof " +
    "instanceof export default switch case do void null undefined true false fn pub struct impl enum match " +
    "use mod mut self int float char double long unsigned static include package func go type interface")
    .split(" "),
);

/**
 * Comments, strings, numbers and keywords as spans; everything else as text. Language-agnostic on purpose.
 */
function highlight(code: string): Node[] {
  const out: Node[] = [];
  // Alternatives: comments, strings, numbers, words.
  const re = new RegExp(
    [
      /(#[^\n]*|\/\/[^\n]*|\/\*[\s\S]*?\*\/)/.source,
      /("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)/.source,
      /\b(\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?)\b/.source,
      /\b([A-Za-z_]\w*)\b/.source,
    ].join("|"),
    "g",
  );
  let last = 0;
  for (const m of code.matchAll(re)) {
    const cls = m[1] ? "c" : m[2] ? "s" : m[3] ? "n" : KEYWORDS.has(m[4]) ? "k" : null;
    if (!cls) continue;
    if (m.index! > last) out.push(document.createTextNode(code.slice(last, m.index)));
    out.push(h("span", { class: `tok-${cls}` }, m[0]));
    last = m.index! + m[0].length;
  }
  if (last < code.length) out.push(document.createTextNode(code.slice(last)));
  return out;
}
