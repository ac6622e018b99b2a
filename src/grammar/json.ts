/**
 * JSON text as regex nodes: strings (valid UTF-8 only), numbers, literals, separators, containers, and
 * any JSON value up to a nesting depth. Whitespace policy: one optional space after each `:` and `,`,
 * nothing else between tokens, so `{"a":1,"b":[2,3]}` and `{"a": 1, "b": [2, 3]}` both match while
 * pretty-printed JSON does not; the automaton stays small and can never loop on whitespace.
 * @module
 */
import {
  altNode,
  bytesNode,
  classNode,
  EMPTY,
  literalNode,
  type Node,
  optNode,
  repeatNode,
  seqNode,
  starNode,
} from "./regex.ts";

const CONT = classNode([0x80, 0xbf]);
const HEX = classNode([0x30, 0x39], [0x41, 0x46], [0x61, 0x66]);
const DIGIT = classNode([0x30, 0x39]);
const DIGITS = repeatNode(DIGIT, 1, Infinity);

/** A complete, valid UTF-8 sequence of 2 to 4 bytes: no overlongs, no surrogates, nothing past U+10FFFF. */
export const UTF8_MULTIBYTE: Node = altNode(
  seqNode(classNode([0xc2, 0xdf]), CONT),
  seqNode(bytesNode([0xe0]), classNode([0xa0, 0xbf]), CONT),
  seqNode(classNode([0xe1, 0xec], [0xee, 0xef]), CONT, CONT),
  seqNode(bytesNode([0xed]), classNode([0x80, 0x9f]), CONT),
  seqNode(bytesNode([0xf0]), classNode([0x90, 0xbf]), CONT, CONT),
  seqNode(classNode([0xf1, 0xf3]), CONT, CONT, CONT),
  seqNode(bytesNode([0xf4]), classNode([0x80, 0x8f]), CONT, CONT),
);

/** One character inside a JSON string: a plain byte 0x20-0x7F, an escape, or a UTF-8 sequence. */
export const JSON_CHAR: Node = altNode(
  classNode([0x20, 0x21], [0x23, 0x5b], [0x5d, 0x7f]),
  seqNode(bytesNode([0x5c]), classNode(...'"\\/bfnrt'.split("").map((c) => c.charCodeAt(0)))),
  seqNode(literalNode("\\u"), HEX, HEX, HEX, HEX),
  UTF8_MULTIBYTE,
);

const QUOTE = literalNode('"');
/** Any JSON string. */
export const JSON_STRING: Node = seqNode(QUOTE, starNode(JSON_CHAR), QUOTE);

/**
 * A JSON string of `min` to `max` characters, counted as code points: an escape counts one (so a surrogate
 * pair written as two `\u` escapes counts two).
 */
export function stringNode(min = 0, max = Infinity): Node {
  if (min === 0 && max === Infinity) return JSON_STRING;
  return seqNode(QUOTE, repeatNode(JSON_CHAR, min, max), QUOTE);
}

/** `-?(0|[1-9][0-9]*)`. */
export const JSON_INTEGER: Node = seqNode(
  optNode(literalNode("-")),
  altNode(literalNode("0"), seqNode(classNode([0x31, 0x39]), starNode(DIGIT))),
);

/** A JSON number: integer part, optional fraction, optional exponent. */
export const JSON_NUMBER: Node = seqNode(
  JSON_INTEGER,
  optNode(seqNode(literalNode("."), DIGITS)),
  optNode(seqNode(classNode(0x45, 0x65), optNode(classNode(0x2b, 0x2d)), DIGITS)),
);

export const JSON_BOOLEAN: Node = altNode(literalNode("true"), literalNode("false"));
export const JSON_NULL: Node = literalNode("null");

/** `,` and the optional space after it. */
export const COMMA: Node = seqNode(literalNode(","), optNode(literalNode(" ")));
/** `:` and the optional space after it. */
export const COLON: Node = seqNode(literalNode(":"), optNode(literalNode(" ")));

/** An object member: the key (exactly as JSON.stringify writes it), the colon, the value. */
export function memberNode(key: string, value: Node): Node {
  return seqNode(literalNode(JSON.stringify(key)), COLON, value);
}

/** An object with any string keys and `value` for every value (keys may repeat). */
export function anyKeysObjectNode(value: Node): Node {
  const member = seqNode(JSON_STRING, COLON, value);
  return seqNode(literalNode("{"), optNode(repeatNode(member, 1, Infinity, COMMA)), literalNode("}"));
}

/** An array of `min` to `max` items, each `item`. */
export function arrayNode(item: Node, min = 0, max = Infinity): Node {
  return seqNode(literalNode("["), repeatNode(item, min, max, COMMA), literalNode("]"));
}

const SCALAR: Node = altNode(JSON_STRING, JSON_NUMBER, JSON_BOOLEAN, JSON_NULL);
const anyCache: Node[] = [SCALAR];

/**
 * Any JSON value with at most `depth` levels of containers (0: scalars only). A bound is needed for the
 * automaton to be finite; its size grows about 2^depth.
 */
export function anyValueNode(depth: number): Node {
  const d = Math.max(0, Math.floor(depth));
  for (let k = anyCache.length; k <= d; k++) {
    const inner = anyCache[k - 1];
    anyCache.push(altNode(SCALAR, anyKeysObjectNode(inner), arrayNode(inner)));
  }
  return anyCache[d];
}

/**
 * Exactly this value (enum/const), written as JSON.stringify writes it but with the whitespace policy's
 * optional spaces in objects and arrays. Values JSON cannot hold (undefined, functions) match nothing.
 */
export function jsonLiteralNode(value: unknown): Node {
  if (Array.isArray(value)) {
    return seqNode(
      literalNode("["),
      joined(value.map((v) => jsonLiteralNode(v === undefined ? null : v))),
      literalNode("]"),
    );
  }
  if (value !== null && typeof value === "object") {
    const members = Object.entries(value).filter(([, v]) => JSON.stringify(v) !== undefined)
      .map(([k, v]) => memberNode(k, jsonLiteralNode(v)));
    return seqNode(literalNode("{"), joined(members), literalNode("}"));
  }
  const text = JSON.stringify(value);
  return text === undefined ? altNode() : literalNode(text);
}

function joined(items: Node[]): Node {
  if (items.length === 0) return EMPTY;
  return seqNode(...items.flatMap((it, i) => i === 0 ? [it] : [COMMA, it]));
}
