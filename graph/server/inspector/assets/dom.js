// Small DOM helpers. Every string from the server goes in as text (textContent, text nodes,
// setAttribute), never as markup.

/**
 * h("button", {class: "x", type: "button", onclick: fn}, "label", child, ...)
 * Attributes: `class`, `text`, `dataset` (object), `on<event>` (function), booleans (true
 * sets an empty attribute, false/null/undefined leaves it out), anything else as a string.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replace el's children (null/false children left out, unlike el.replaceChildren). */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

const dateTime = new Intl.DateTimeFormat(undefined, {
  dateStyle: "medium",
  timeStyle: "medium",
});
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const integer = new Intl.NumberFormat();

export function formatNumber(n) {
  if (n === null || n === undefined) return "—";
  return typeof n === "number" ? integer.format(n) : String(n);
}

/** "3 minutes ago" (relative to now), for a timestamp string. */
export function relativeTime(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return String(iso);
  const seconds = Math.round((t - now) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 45) return relative.format(seconds, "second");
  if (abs < 45 * 60) return relative.format(Math.round(seconds / 60), "minute");
  if (abs < 22 * 3600) return relative.format(Math.round(seconds / 3600), "hour");
  if (abs < 26 * 86400) return relative.format(Math.round(seconds / 86400), "day");
  return dateTime.format(new Date(t));
}

/** A <time> element: relative text, the full date and time as its tooltip. */
export function timeEl(iso, { absolute = false } = {}) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const t = Date.parse(iso);
  const full = Number.isNaN(t) ? String(iso) : dateTime.format(new Date(t));
  return h(
    "time",
    { datetime: iso, title: full, "data-relative": absolute ? null : "" },
    absolute ? full : relativeTime(iso),
  );
}

/** Bring every relative time on the page up to date (run now and then). */
export function refreshRelativeTimes(root = document) {
  const now = Date.now();
  for (const el of root.querySelectorAll("time[data-relative]")) {
    const text = relativeTime(el.getAttribute("datetime"), now);
    if (el.textContent !== text) el.textContent = text;
  }
}

/** "1 h 2 min", "3.4 s", from milliseconds. */
export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours} h ${m % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export function durationBetween(startIso, endIso) {
  const start = Date.parse(startIso);
  const end = endIso ? Date.parse(endIso) : Date.now();
  if (Number.isNaN(start) || Number.isNaN(end)) return null;
  return end - start;
}

/** Say something to screen readers (the polite live region). */
export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region) return;
  region.textContent = "";
  // A fresh text node after a tick, so that the same sentence twice is read twice.
  setTimeout(() => {
    region.textContent = text;
  }, 30);
}

/** Truncate for labels (the full text stays available elsewhere). */
export function shorten(text, max = 80) {
  const s = String(text ?? "");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

let idCounter = 0;
export function uid(prefix = "id") {
  idCounter += 1;
  return `${prefix}-${idCounter}`;
}

/** Debounce: run `fn` once, `ms` after the last call. */
export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}
