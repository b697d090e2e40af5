// JSON the way convograph stores it: losslessly. JavaScript numbers hold integers exactly up
// to 2^53 only, so a number the double would change is kept as its source text (a BigNum)
// and printed back exactly as the server sent it. Also: a structural diff of two documents.

export class BigNum {
  constructor(source) {
    this.source = source;
  }
  toString() {
    return this.source;
  }
  toJSON() {
    return this.source;
  }
}

function exact(value, source) {
  if (typeof source !== "string") return true;
  if (/^-?\d+$/.test(source)) return Number.isSafeInteger(value);
  // Up to 15 significant digits a double always gives back; beyond that keep the text.
  const digits = source.replace(/^-/, "").split(/[eE]/)[0].replace(".", "").replace(/^0+/, "");
  return digits.length <= 15;
}

/** JSON.parse that keeps numbers a double would change (needs JSON.parse source access). */
export function parseLossless(text) {
  return JSON.parse(text, function reviver(key, value, context) {
    if (typeof value === "number" && context && !exact(value, context.source)) {
      return new BigNum(context.source);
    }
    return value;
  });
}

/** Pretty JSON text, BigNums printed as their source. */
export function toJSONText(value, indent = 2) {
  const pad = " ".repeat(indent);
  const out = [];
  const walk = (v, depth) => {
    if (v instanceof BigNum) {
      out.push(v.source);
    } else if (v === null || typeof v !== "object") {
      out.push(v === undefined ? "null" : JSON.stringify(v));
    } else if (Array.isArray(v)) {
      if (v.length === 0) {
        out.push("[]");
        return;
      }
      out.push("[\n");
      v.forEach((item, i) => {
        out.push(pad.repeat(depth + 1));
        walk(item, depth + 1);
        out.push(i < v.length - 1 ? ",\n" : "\n");
      });
      out.push(pad.repeat(depth), "]");
    } else {
      const keys = Object.keys(v);
      if (keys.length === 0) {
        out.push("{}");
        return;
      }
      out.push("{\n");
      keys.forEach((k, i) => {
        out.push(pad.repeat(depth + 1), JSON.stringify(k), ": ");
        walk(v[k], depth + 1);
        out.push(i < keys.length - 1 ? ",\n" : "\n");
      });
      out.push(pad.repeat(depth), "}");
    }
  };
  walk(value, 0);
  return out.join("");
}

/** One-line JSON (for diff values), shortened to `max` characters. */
export function compact(value, max = 200) {
  const text = toJSONText(value, 0).replace(/\n/g, "");
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function kind(v) {
  if (v instanceof BigNum) return "number";
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

/** Canonical text (sorted keys): equal documents give equal text. */
function canonical(v) {
  if (v instanceof BigNum) return v.source;
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  return `{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
    .join(",")}}`;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** ["a", 2, "b c"] -> a[2]["b c"] */
export function formatPath(path) {
  if (path.length === 0) return "(the whole document)";
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else if (IDENT.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}

// Arrays up to this length are aligned by their longest common subsequence (an element put
// in front shows as one addition, not as every element changed); longer ones index by index.
const LCS_LIMIT = 2000;

/**
 * The changes that turn `before` into `after`:
 * [{op: "added"|"removed"|"changed", path: [...], before?, after?}], in document order.
 */
export function diffJSON(before, after) {
  const changes = [];
  walkDiff(before, after, [], changes);
  return changes;
}

function walkDiff(a, b, path, out) {
  const ka = kind(a);
  const kb = kind(b);
  if (ka === "object" && kb === "object") {
    const keys = Object.keys(a);
    for (const k of Object.keys(b)) if (!Object.hasOwn(a, k)) keys.push(k);
    for (const k of keys) {
      const p = [...path, k];
      if (!Object.hasOwn(b, k)) out.push({ op: "removed", path: p, before: a[k] });
      else if (!Object.hasOwn(a, k)) out.push({ op: "added", path: p, after: b[k] });
      else walkDiff(a[k], b[k], p, out);
    }
    return;
  }
  if (ka === "array" && kb === "array") {
    diffArrays(a, b, path, out);
    return;
  }
  if (ka !== kb || canonical(a) !== canonical(b)) {
    out.push({ op: "changed", path, before: a, after: b });
  }
}

function diffArrays(a, b, path, out) {
  if (a.length > LCS_LIMIT || b.length > LCS_LIMIT) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i += 1) {
      if (i >= b.length) out.push({ op: "removed", path: [...path, i], before: a[i] });
      else if (i >= a.length) out.push({ op: "added", path: [...path, i], after: b[i] });
      else walkDiff(a[i], b[i], [...path, i], out);
    }
    return;
  }
  const ca = a.map(canonical);
  const cb = b.map(canonical);
  // lengths[i][j]: LCS of a[i:] and b[j:]
  const lengths = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      lengths[i][j] =
        ca[i] === cb[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  let removed = [];
  let added = [];
  const flush = () => {
    // A run of removals and additions between two kept elements: pair them up as changes
    // (recursing, so a changed field inside an element is named), the rest as they are.
    const pairs = Math.min(removed.length, added.length);
    for (let k = 0; k < pairs; k += 1) walkDiff(a[removed[k]], b[added[k]], [...path, added[k]], out);
    for (const r of removed.slice(pairs)) out.push({ op: "removed", path: [...path, r], before: a[r] });
    for (const ad of added.slice(pairs)) out.push({ op: "added", path: [...path, ad], after: b[ad] });
    removed = [];
    added = [];
  };
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && ca[i] === cb[j]) {
      flush();
      i += 1;
      j += 1;
    } else if (j >= b.length || (i < a.length && lengths[i + 1][j] >= lengths[i][j + 1])) {
      removed.push(i);
      i += 1;
    } else {
      added.push(j);
      j += 1;
    }
  }
  flush();
}
