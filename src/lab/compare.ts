/**
 * Comparing kernel outputs with their float64 reference: |got − ref| ≤ atol + rtol·|ref| per element (plus,
 * where a tolerance carries one, a per-element term: a rounding bound derived from the kernel's arithmetic).
 * NaN in the reference means "not checked" (big CLI shapes check a sample); NaN or ±Inf from the kernel
 * always fails. Reports name the worst element and the first failures (index, got, expected).
 * @module
 */

export interface Tolerance {
  atol: number;
  rtol: number;
  /** A per-element term added to the bound (a kernel's derived rounding bound), and what it is. */
  extra?: { bound: ArrayLike<number>; what: string };
}

/** Bitwise equality (ids, slot state, untouched buffers). */
export const EXACT: Tolerance = { atol: 0, rtol: 0 };

export interface Mismatch {
  index: number;
  got: number;
  want: number;
}

export interface OutputReport {
  name: string;
  ok: boolean;
  tol: Tolerance;
  /** Elements compared. */
  checked: number;
  failed: number;
  /** Largest |got − ref|, and the largest |got − ref| / (atol + rtol·|ref|) (≤ 1 passes). */
  maxAbs: number;
  maxRatio: number;
  worst: Mismatch | null;
  /** First few failing elements. */
  failures: Mismatch[];
  /** Extra lines (custom checks, e.g. the sampler's borderline draws). */
  notes?: string[];
}

export function compare(
  name: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  tol: Tolerance,
): OutputReport {
  const r: OutputReport = {
    name,
    ok: true,
    tol,
    checked: 0,
    failed: 0,
    maxAbs: 0,
    maxRatio: 0,
    worst: null,
    failures: [],
  };
  if (got.length < want.length) {
    r.ok = false;
    r.notes = [`got ${got.length} values, expected ${want.length}`];
    return r;
  }
  for (let i = 0; i < want.length; i++) {
    const w = want[i];
    if (Number.isNaN(w)) continue;
    const g = got[i];
    r.checked++;
    const d = Math.abs(g - w);
    const bound = tol.atol + tol.rtol * Math.abs(w) + (tol.extra?.bound[i] ?? 0);
    const bad = !Number.isFinite(g) || d > bound;
    const ratio = !Number.isFinite(g) ? Infinity : bound > 0 ? d / bound : d > 0 ? Infinity : 0;
    r.maxAbs = Math.max(r.maxAbs, Number.isFinite(g) ? d : Infinity);
    if (r.worst === null || ratio > r.maxRatio) {
      r.maxRatio = ratio;
      r.worst = { index: i, got: g, want: w };
    }
    if (bad) {
      r.failed++;
      if (r.failures.length < 5) r.failures.push({ index: i, got: g, want: w });
    }
  }
  r.ok = r.failed === 0;
  return r;
}

/** A multi-line description of a report (test failures and the CLI print this). */
export function describeReport(r: OutputReport): string {
  const head =
    `${r.name}: ${r.ok ? "ok" : "FAIL"} — ${r.checked} checked, ${r.failed} failed, max |d| ${
      fmt(r.maxAbs)
    }, ` +
    `max |d|/(atol+rtol·|ref|${r.tol.extra ? "+e" : ""}) ${fmt(r.maxRatio)} (atol ${fmt(r.tol.atol)}, rtol ${
      fmt(r.tol.rtol)
    }` +
    `${r.tol.extra ? `, e: ${r.tol.extra.what}` : ""})`;
  const lines = [head];
  if (r.worst && r.maxAbs > 0) {
    lines.push(`  worst [${r.worst.index}]: got ${r.worst.got}, expected ${r.worst.want}`);
  }
  for (const f of r.failures) lines.push(`  fail  [${f.index}]: got ${f.got}, expected ${f.want}`);
  for (const n of r.notes ?? []) lines.push(`  ${n}`);
  return lines.join("\n");
}

function fmt(v: number): string {
  return v === 0 ? "0" : Math.abs(v) >= 1e-3 && Math.abs(v) < 1e4 ? v.toPrecision(3) : v.toExponential(2);
}
