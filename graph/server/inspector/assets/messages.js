// One transcript message as a chat entry: role, content, tool calls and results collapsed with
// their JSON a click away, token_count when present, and a raw-JSON toggle.

import { formatNumber, h, timeEl, uid } from "./dom.js";
import { BigNum, toJSONText } from "./json.js";

const KNOWN_ROLES = new Set(["user", "assistant", "system", "tool", "developer"]);
const ROLE_NAMES = {
  user: "User",
  assistant: "Assistant",
  system: "System",
  tool: "Tool",
  developer: "Developer",
};

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof BigNum);
}

/** A <details> with a summary line and a JSON body. */
export function jsonDetails(summary, value, { open = false, className = "" } = {}) {
  return h(
    "details",
    { class: `json-details ${className}`.trim(), open },
    h("summary", {}, summary),
    h("pre", { class: "json", tabindex: "0" }, toJSONText(value)),
  );
}

// A text longer than this is shown cut, with a button for the rest: a message of a few
// hundred thousand characters drew a column tens of thousands of pixels tall.
const SHOWN_CHARS = 8000;

/** A message's text: whole, or its first SHOWN_CHARS characters and a button for the rest. */
function textBlock(text) {
  if (text.length <= SHOWN_CHARS) return h("div", { class: "msg-text" }, text);
  // Not between the two halves of a surrogate pair.
  const cut = /[\uD800-\uDBFF]/.test(text[SHOWN_CHARS - 1]) ? SHOWN_CHARS - 1 : SHOWN_CHARS;
  const el = h("div", { class: "msg-text" }, `${text.slice(0, cut)}…`);
  const all = h("button", { type: "button", class: "quiet small show-all" },
    `Show all ${formatNumber(text.length)} characters`);
  all.addEventListener("click", () => {
    el.textContent = text;
    all.remove();
    el.tabIndex = -1;
    el.focus({ preventScroll: true });
  });
  return h("div", { class: "msg-long" }, el, all);
}

/** Text of a content value: strings as they are, text parts joined, anything else as JSON. */
function contentBlock(content) {
  if (content === null || content === undefined || content === "") return null;
  if (typeof content === "string") return textBlock(content);
  if (Array.isArray(content) && content.every((p) => isObject(p) && typeof p.text === "string")) {
    return textBlock(content.map((p) => p.text).join("\n\n"));
  }
  return h("pre", { class: "json msg-json", tabindex: "0" }, toJSONText(content));
}

function parsedArguments(args) {
  if (typeof args !== "string") return args;
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function toolName(call) {
  if (!isObject(call)) return "call";
  const fn = isObject(call.function) ? call.function : null;
  return String((fn && fn.name) || call.name || call.tool || call.type || "call");
}

function toolCallsBlock(calls) {
  const list = Array.isArray(calls) ? calls : [calls];
  const names = list.map(toolName);
  const label = `Tool call${list.length === 1 ? "" : "s"}: ${names.join(", ")}`;
  return h(
    "details",
    { class: "json-details tool-calls" },
    h("summary", {}, label),
    list.map((call) => {
      const value = isObject(call) && isObject(call.function)
        ? { ...call, function: { ...call.function, arguments: parsedArguments(call.function.arguments) } }
        : isObject(call) && "arguments" in call
          ? { ...call, arguments: parsedArguments(call.arguments) }
          : call;
      return h("pre", { class: "json", tabindex: "0" }, toJSONText(value));
    }),
  );
}

function tokenCount(data) {
  const n = isObject(data) ? data.token_count : undefined;
  if (typeof n === "number" || n instanceof BigNum) return n;
  return null;
}

/**
 * message: {seq, role, data, createdAt} (data: the message object as sent).
 * Returns an <li> holding an <article>.
 */
export function renderMessage(message) {
  const data = message.data;
  const role = String(message.role ?? (isObject(data) ? data.role : "") ?? "");
  const roleClass = KNOWN_ROLES.has(role) ? role : "other";
  const isTool = role === "tool";
  const content = isObject(data) ? data.content : message.content;
  const tokens = tokenCount(data);
  const rawId = uid("raw");
  const body = h("div", { class: "msg-body" });

  const type = isObject(data) && typeof data.type === "string" ? data.type : null;
  if (isTool) {
    // A tool result: collapsed, named by its call id or tool name when the message has one.
    // Only a text names it: any other value (an object, a number) is shown in the body.
    const name = isObject(data)
      ? [data.name, data.tool_name, data.tool_call_id].find((v) => typeof v === "string" && v)
      : null;
    const label = `Tool result${name ? `: ${name}` : ""}`;
    const value = typeof content === "string" ? parsedArguments(content) : content;
    body.append(
      typeof value === "string"
        ? h("details", { class: "json-details tool-result" }, h("summary", {}, label), textBlock(value))
        : jsonDetails(label, value ?? null, { className: "tool-result" }),
    );
  } else {
    const block = contentBlock(content);
    if (block) body.append(block);
  }
  if (isObject(data) && data.tool_calls !== undefined && data.tool_calls !== null) {
    body.append(toolCallsBlock(data.tool_calls));
  }
  if (isObject(data) && data.tool_results !== undefined && data.tool_results !== null) {
    const results = Array.isArray(data.tool_results) ? data.tool_results : [data.tool_results];
    body.append(jsonDetails(`Tool result${results.length === 1 ? "" : "s"} (${results.length})`,
      data.tool_results, { className: "tool-result" }));
  }
  if (isObject(data) && data.payload !== undefined && data.payload !== null) {
    body.append(jsonDetails("Payload", data.payload));
  }
  if (!body.childNodes.length) body.append(h("p", { class: "muted" }, "(no content)"));

  const raw = h("pre", { class: "json raw", id: rawId, hidden: true, tabindex: "0" });
  const toggle = h(
    "button",
    { type: "button", class: "quiet small raw-toggle", "aria-expanded": "false", "aria-controls": rawId },
    "Raw JSON",
  );
  toggle.addEventListener("click", () => {
    const show = raw.hidden;
    if (show && !raw.textContent) raw.textContent = toJSONText(data);
    raw.hidden = !show;
    body.hidden = show;
    toggle.setAttribute("aria-expanded", String(show));
  });

  const seq = message.seq;
  const article = h(
    "article",
    {
      class: `msg msg-${roleClass}`,
      "aria-label": `${seq ? `Message ${seq}, ` : ""}${ROLE_NAMES[role] || role || "unknown role"}`,
    },
    h(
      "header",
      { class: "msg-head" },
      h("span", { class: `role role-${roleClass}` }, ROLE_NAMES[role] || role || "(no role)"),
      seq ? h("span", { class: "seq" }, `#${seq}`) : null,
      type && type !== "text" ? h("span", { class: "badge" }, type) : null,
      tokens !== null ? h("span", { class: "tokens" }, `${formatNumber(tokens)} tokens`) : null,
      message.createdAt ? timeEl(message.createdAt) : null,
      toggle,
    ),
    body,
    raw,
  );
  return h("li", { class: "msg-item", dataset: { seq: seq ?? "" } }, article);
}
