// The inspector's entry module: sign-in, the router (#/, #/c/<id>[/tree|/snapshots],
// #/sessions[/<id>]), the workspace figures, the live-connection indicator and Escape.
//
// The token lives in sessionStorage only (this tab), goes out as the bearer header and as the
// WebSocket's connection_init payload, and is never put in a URL or printed.

import { announce, debounce, fill, formatNumber, h, refreshRelativeTimes } from "./dom.js";
import { AuthError, createClient, describeError, isTransient, retryDelayMs } from "./gql.js";
import { ConversationView } from "./conversation.js";
import { ConversationList } from "./list.js";
import { CAPABILITIES, FIGURES, VIEWER } from "./queries.js";
import { SessionsView } from "./sessions.js";
import { STATUS_TEXT } from "./tree.js";
import { TransportWS, websocketUrl } from "./ws.js";

const TOKEN_KEY = "convograph.inspector.token";

const config = (() => {
  try {
    return JSON.parse(document.getElementById("config").textContent || "{}");
  } catch {
    return {};
  }
})();
const endpoint = new URL(config.endpoint || "/graphql", window.location.href).href;

const $ = (id) => document.getElementById(id);
const dom = {
  boot: $("boot"),
  signin: $("signin"),
  form: $("signin-form"),
  token: $("token"),
  signinError: $("signin-error"),
  app: $("app"),
  views: $("views"),
  whoami: $("whoami"),
  live: $("live"),
  signOut: $("sign-out"),
  figures: $("figures"),
};

let token = null;
try {
  token = window.sessionStorage.getItem(TOKEN_KEY);
} catch {
  token = null;
}
const request = createClient(endpoint, () => token);

const state = {
  viewer: null,
  capabilities: null, // detectCapabilities(), at sign-in
  ws: null,
  list: null,
  view: null, // ConversationView | SessionsView
  viewKey: null,
  listPane: null,
  detailSlot: null,
};

// -- sign-in -----------------------------------------------------------------------

function showSignin(message) {
  dom.boot.hidden = true;
  dom.app.hidden = true;
  dom.views.hidden = true;
  dom.whoami.hidden = true;
  dom.live.hidden = true;
  dom.signOut.hidden = true;
  dom.figures.hidden = true;
  dom.signin.hidden = false;
  dom.signinError.textContent = message || "";
  dom.token.value = "";
  dom.token.focus();
}

dom.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const candidate = dom.token.value.trim();
  if (!candidate) {
    dom.signinError.textContent = "Enter a token first.";
    dom.token.focus();
    return;
  }
  const button = dom.form.querySelector("button[type=submit]");
  button.disabled = true;
  dom.signinError.textContent = "";
  try {
    const data = await request(VIEWER, {}, { token: candidate });
    token = candidate;
    try {
      window.sessionStorage.setItem(TOKEN_KEY, candidate);
    } catch {
      // Storage may be off: the token then lives as long as this page.
    }
    dom.token.value = "";
    await start(data.viewer);
  } catch (err) {
    dom.signinError.textContent =
      err instanceof AuthError
        ? `This token was not accepted (${err.message}). Check that it is complete and not revoked.`
        : `Could not sign in: ${describeError(err)}`;
    dom.token.select();
  } finally {
    button.disabled = false;
  }
});

function signOut(message) {
  token = null;
  try {
    window.sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // nothing stored
  }
  if (state.view) state.view.destroy && state.view.destroy();
  if (state.list) state.list.destroy();
  if (state.ws) state.ws.dispose();
  Object.assign(state, { viewer: null, ws: null, list: null, view: null, viewKey: null });
  dom.app.replaceChildren();
  showSignin(message);
}

dom.signOut.addEventListener("click", () => signOut(""));

let authFailing = false;
function onAuthError() {
  if (authFailing) return;
  authFailing = true;
  signOut("The server no longer accepts this token (revoked or expired?). Sign in again.");
  authFailing = false;
}

// -- after sign-in ---------------------------------------------------------------

const BASE_CAPABILITIES = {
  figures: false,
  ownerTypeFilter: false,
  eventCursor: false,
  readCursor: false,
  eventMessageCount: false,
};
// Tries of the question before the page goes on without its answer (about 15 s of backoff).
const CAPABILITY_TRIES = 5;

/** What the server offers beyond the base contract, asked by introspection. A failure that
 * may pass (the network, a restart, the database away) is asked again after the wait, saying
 * so where the page shows its state: once taken for "introspection off", it left the page
 * without event cursors (reading everything again after each reconnect) for the session. */
async function detectCapabilities() {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return capabilitiesOf(await request(CAPABILITIES));
    } catch (err) {
      if (err instanceof AuthError) throw err;
      // Introspection may be off: use only what the base contract has.
      if (!isTransient(err) || attempt + 1 >= CAPABILITY_TRIES) return { ...BASE_CAPABILITIES };
      const waitMs = retryDelayMs(err, attempt);
      const seconds = Math.max(1, Math.round(waitMs / 1000));
      const said = `Could not ask the server what it offers: ${describeError(err)} (asking again in ${seconds} s…)`;
      if (dom.signin.hidden) dom.boot.textContent = said;
      else dom.signinError.textContent = said;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

function capabilitiesOf(data) {
  const names = (list) => new Set((list || []).map((x) => x.name));
  const queryFields = names(data.query && data.query.fields);
  const filterFields = names(data.filter && data.filter.inputFields);
  const eventFields = names(data.event && data.event.fields);
  const conversationFields = names(data.conversation && data.conversation.fields);
  const subFields = (data.schema.subscriptionType && data.schema.subscriptionType.fields) || [];
  const events = subFields.find((f) => f.name === "conversationEvents");
  return {
    figures: queryFields.has("workspaceFigures"),
    ownerTypeFilter: filterFields.has("ownerType"),
    eventCursor: eventFields.has("cursor") && Boolean(events && events.args.some((a) => a.name === "after")),
    readCursor: conversationFields.has("eventCursor"),
    eventMessageCount: eventFields.has("messageCount"),
  };
}

async function start(viewer) {
  // state.viewer is set last: until the page is built, the router and the key handlers wait
  // (an address followed meanwhile is routed by the route() call below).
  state.capabilities = await detectCapabilities();
  state.ws = new TransportWS({
    url: websocketUrl(endpoint),
    connectionParams: () => ({ Authorization: `Bearer ${token}` }),
    onState: onLiveState,
  });
  dom.boot.hidden = true;
  dom.signin.hidden = true;
  dom.signinError.textContent = "";
  dom.app.hidden = false;
  dom.views.hidden = false;
  dom.signOut.hidden = false;
  dom.whoami.hidden = false;
  const scopes = viewer.scopes || [];
  fill(dom.whoami,
    h("span", { class: "ws-key" }, viewer.workspace.key),
    " · ",
    h("span", {}, `${String(viewer.ownerType).toLowerCase()}:${viewer.ownerKey}`),
    " · ",
    h("span", { class: "scopes" }, scopes.join(", ").toLowerCase()),
  );
  const canFilterOwner = scopes.includes("ADMIN") || scopes.includes("SERVICE");
  state.list = new ConversationList({ request, canFilterOwner, onAuthError });
  state.detailSlot = h("div", { class: "detail-slot" });
  fill(dom.app, state.list.el, state.detailSlot);
  state.viewer = viewer;
  state.list.load();
  loadFigures();
  route({ focus: true });
}

const appForViews = {
  get request() {
    return request;
  },
  get ws() {
    return state.ws;
  },
  get capabilities() {
    return state.capabilities;
  },
  onAuthError,
  listRemove(id) {
    if (state.list) state.list.remove(id);
  },
  listTouch(id, changes) {
    if (state.list) state.list.touch(id, changes);
  },
  figuresChanged: debounce(() => loadFigures(), 1500),
};

// -- live indicator --------------------------------------------------------------

async function onLiveState({ state: s, delayMs, code }) {
  const live = dom.live;
  live.className = `live live-${s}`;
  if (s === "closed") {
    live.hidden = true;
    return;
  }
  live.hidden = false;
  if (s === "live") live.textContent = "Live";
  else if (s === "connecting") live.textContent = "Connecting…";
  else if (s === "retrying") live.textContent = `Reconnecting in ${Math.max(1, Math.round(delayMs / 1000))} s…`;
  else if (s === "refused") {
    live.textContent = "Live updates off";
    if (code === 4401 || code === 4403) {
      // Refused at connection_init: is the token itself gone?
      try {
        await request(VIEWER);
      } catch (err) {
        if (err instanceof AuthError) onAuthError();
      }
    }
  }
}

setInterval(() => refreshRelativeTimes(), 20_000);

window.addEventListener("online", () => state.ws && state.ws.retryNow());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && state.ws) state.ws.retryNow();
});

// -- workspace figures -----------------------------------------------------------

async function loadFigures() {
  if (!state.viewer) return;
  dom.figures.hidden = false;
  let figures = null;
  if (state.capabilities.figures) {
    try {
      figures = (await request(FIGURES)).workspaceFigures;
    } catch (err) {
      if (err instanceof AuthError) {
        onAuthError();
        return;
      }
      figures = null;
    }
  }
  const n = (v) => (figures ? formatNumber(v) : "—");
  const byStatus = {};
  for (const d of (figures && figures.delegations) || []) byStatus[d.status] = d.count;
  const item = (label, value, extra) =>
    h("div", { class: "figure" }, h("dt", {}, label), h("dd", {}, value, extra || null));
  const delegations = figures
    ? h(
        "span",
        { class: "by-status" },
        Object.keys(STATUS_TEXT).map((s) =>
          h("span", { class: `status status-${s.toLowerCase()}` }, h("span", { class: "dot", "aria-hidden": "true" }),
            `${STATUS_TEXT[s]} ${formatNumber(byStatus[s] || 0)}`),
        ),
      )
    : "—";
  fill(dom.figures,
    h(
      "dl",
      { class: "figure-list", title: figures ? null : "This server does not report workspace figures yet." },
      item("Conversations", n(figures && figures.conversations)),
      item("Messages", n(figures && figures.messages)),
      item("Tokens", n(figures && figures.tokenCount)),
      item("Delegations", delegations),
    ),
  );
}

// -- router ----------------------------------------------------------------------

function parseHash() {
  const hash = window.location.hash || "#/";
  if (!hash.startsWith("#/")) return null; // e.g. the skip link's #main
  const parts = hash.slice(2).split("/").map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  if (parts[0] === "c" && parts[1]) return { view: "conversation", id: parts[1], tab: parts[2] || "transcript" };
  if (parts[0] === "sessions") return { view: "sessions", sessionId: parts.slice(1).join("/") };
  return { view: "list" };
}

function route({ focus = false, previous = null } = {}) {
  if (!state.viewer) return;
  const r = parseHash();
  if (!r) return;
  dom.app.dataset.view = r.view;
  for (const a of dom.views.querySelectorAll("a")) {
    const current = (r.view === "sessions") === (a.dataset.view === "sessions");
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  state.list.el.hidden = r.view === "sessions";
  const key = r.view === "conversation" ? `c:${r.id}` : r.view === "sessions" ? "sessions" : "list";
  if (key === state.viewKey && state.view) {
    if (r.view === "conversation") state.view.showTab(r.tab);
    if (r.view === "sessions" && r.sessionId && r.sessionId !== state.view.sessionId) state.view.load(r.sessionId);
    return;
  }
  if (state.view && state.view.destroy) state.view.destroy();
  state.view = null;
  state.viewKey = key;
  if (r.view === "conversation") {
    const view = new ConversationView({ app: appForViews, id: r.id, tab: r.tab });
    state.view = view;
    state.list.select(r.id);
    fill(state.detailSlot, view.el);
    view.load().then(() => {
      if (state.view === view && focus !== false) view.focusTitle();
    });
    announce("Conversation opened");
  } else if (r.view === "sessions") {
    const view = new SessionsView({ app: appForViews, sessionId: r.sessionId });
    state.view = view;
    fill(state.detailSlot, view.el);
    if (r.sessionId) view.load(r.sessionId);
    if (focus) view.focusTitle();
  } else {
    state.list.select(null);
    // Back from a conversation: its row gets the focus again.
    const back = previous && previous.startsWith("c:") ? previous.slice(2) : null;
    if (focus && back && state.list.focusRow(back)) focus = false;
    fill(state.detailSlot,
      h("section", { class: "detail-pane empty", "aria-label": "No conversation open" },
        h("p", { class: "muted" }, "Choose a conversation to see its transcript, delegation tree and snapshots.")),
    );
    if (focus) state.list.focusTitle();
  }
}

window.addEventListener("hashchange", () => route({ focus: true, previous: state.viewKey }));

// -- keyboard: Escape closes the innermost panel ---------------------------------

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented || !state.viewer) return;
  const t = event.target;
  if (t && (t.tagName === "SELECT" || (t.tagName === "INPUT" && t.value))) return; // the control's own Escape
  const openDetails = t && t.closest && t.closest("details[open]");
  if (openDetails) {
    openDetails.open = false;
    openDetails.querySelector("summary").focus();
    event.preventDefault();
    return;
  }
  const view = state.view;
  if (view instanceof ConversationView) {
    event.preventDefault();
    if (view.closePanel()) return;
    window.location.hash = "#/";
  } else if (view instanceof SessionsView) {
    event.preventDefault();
    window.location.hash = "#/";
  }
});

// The skip link: move focus to <main> without changing the route.
document.querySelector("[data-skip]").addEventListener("click", (event) => {
  event.preventDefault();
  document.getElementById("main").focus();
});

// -- boot --------------------------------------------------------------------------

(async function boot() {
  if (!token) {
    showSignin("");
    return;
  }
  try {
    const data = await request(VIEWER);
    await start(data.viewer);
  } catch (err) {
    if (err instanceof AuthError) {
      token = null;
      window.sessionStorage.removeItem(TOKEN_KEY);
      showSignin("The saved token is no longer accepted (revoked or expired?). Sign in again.");
    } else {
      showSignin(`Could not reach the server: ${describeError(err)}`);
    }
  }
})();
