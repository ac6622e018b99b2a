/**
 * Stop strings over streamed text. Text that could still be the start of a stop string is held back, so a
 * client never sees part of a stop sequence; when one completes, the text before it is released and
 * generation ends.
 * @module
 */
export class StopMatcher {
  #held = "";
  constructor(readonly stops: string[]) {}

  /** Feeds new text; returns what may be shown now and the stop string that completed, if any. */
  push(text: string): { emit: string; stopped: string | null } {
    if (this.stops.length === 0) return { emit: text, stopped: null };
    const buf = this.#held + text;
    let first = -1;
    let which: string | null = null;
    for (const s of this.stops) {
      const i = buf.indexOf(s);
      if (i >= 0 && (first < 0 || i < first)) {
        first = i;
        which = s;
      }
    }
    if (which !== null) {
      this.#held = "";
      return { emit: buf.slice(0, first), stopped: which };
    }
    // Hold back the longest suffix that is a prefix of some stop string.
    let keep = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, buf.length); k > keep; k--) {
        if (buf.endsWith(s.slice(0, k))) {
          keep = k;
          break;
        }
      }
    }
    this.#held = buf.slice(buf.length - keep);
    return { emit: buf.slice(0, buf.length - keep), stopped: null };
  }

  /** At the end of generation nothing more can complete a stop string: release what was held. */
  flush(): string {
    const h = this.#held;
    this.#held = "";
    return h;
  }
}
