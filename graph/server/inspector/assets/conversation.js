// One conversation: its facts (lock, expiry, …), and three tabs: the transcript, the
// delegation tree (with a side panel for a child's transcript) and the compaction snapshots.
// While it is open, a conversationEvents subscription (descendants included) keeps all of it
// current; it starts at the position of the page's first read and resumes from the last
// event's cursor when the server has cursors, and reads everything again after a reconnect
// when it has not. A read that fails for a reason that may pass is tried again until one
// succeeds; a stream that ends or fails is followed by a new read and a new stream from it,
// unless the conversation is gone or the token may no longer read it.

import { announce, debounce, fill, formatNumber, h, shorten, timeEl, uid } from "./dom.js";
import { AuthError, GraphQLError, describeError, isTransient, retryDelayMs, showErrorIn } from "./gql.js";
import { toJSONText } from "./json.js";
import { jsonDetails, renderMessage } from "./messages.js";
import { SNAPSHOT, SNAPSHOTS, conversationQuery, eventsSubscription } from "./queries.js";
import { TranscriptView } from "./transcript.js";
import { DelegationTree, STATUS_TEXT, statusBadge } from "./tree.js";

const TABS = [
  { key: "transcript", label: "Transcript" },
  { key: "tree", label: "Delegations" },
  { key: "snapshots", label: "Snapshots" },
];
const SNAPSHOT_RENDER_LIMIT = 200;
// What a stream can end with that no new read or stream would mend.
const FINAL_CODES = new Set(["NOT_FOUND", "FORBIDDEN"]);
// What refuses a `subscribe` before its stream starts: a limit, which a later one may fit.
const NOT_STARTED_CODES = new Set(["LIMIT_EXCEEDED", "RATE_LIMITED"]);
// Why a stream ended, for a person: the server's own message is written for a client's code
// ("read the state, subscribe anew"), which this page does for them. (A stream that falls
// behind is not ended: the server reads what it missed from its log.)
const STREAM_END_TEXT = {
  CURSOR_EXPIRED: "the events since this page's read are no longer kept",
};
// A stream that ran this long before it failed counts as a success: the next one starts at once.
const STREAM_SETTLED_MS = 30_000;
/** A wait in whole seconds, as the page says it ("in 3 s"): rounded up, at least 1. */
const seconds = (ms) => Math.max(1, Math.ceil(ms / 1000));
/** A `show` for retry: the failure in `view`'s error (the conversation's, or a transcript's),
 * with when the read of `name` is tried again, if it is. */
const showFailure = (view, name) => (err, delay) =>
  view.showError(err, delay === null ? "" : `Could not read ${name} (trying again in ${seconds(delay)} s): `);
// Below this width the child-transcript panel covers the screen (inspector.css): what is
// behind it is made inert, so that Tab stays in the panel.
const OVERLAY = window.matchMedia("(max-width: 1099.98px)");

export class ConversationView {
  /** app: {request, ws, capabilities, onAuthError(err), listTouch(id, changes), figuresChanged()} */
  constructor({ app, id, tab }) {
    this.app = app;
    this.id = id;
    this.tab = TABS.some((t) => t.key === tab) ? tab : "transcript";
    this.conv = null;
    this.lastCursor = null;
    this.unsubscribe = null;
    this.subscribedAt = 0;
    this.streamFailures = 0; // streams in a row that failed before STREAM_SETTLED_MS
    this.streamEnds = 0; // the streams that ended so far (see catchUp)
    this.waits = new Map(); // the waits before a next try: key -> {timer, resolve}
    this.runs = new Map(); // the reads tried until they succeed: key -> {done, again} (retry)
    // What the notice says: why the page is not current (or not live), and what it does about
    // it: per read that is being tried again, {what, at}: in flight (at null), or waiting
    // until `at` (see renderNotice).
    this.why = null;
    this.activities = new Map();
    this.tickTimer = null;
    this.deleted = false;
    this.transcript = null;
    this.tree = null;
    this.panel = null; // {node, transcript, el}
    this.snapshotsLoaded = false;
    this.destroyed = false;
    this.refreshHead = debounce(() => this.read(), 250);
    this.refreshTree = debounce(() => this.reloadTree(), 400);
    this.onOverlayChange = () => {
      if (this.panel) this.setBehindInert(OVERLAY.matches);
    };
    OVERLAY.addEventListener("change", this.onOverlayChange);

    this.headEl = h("header", { class: "conv-head" });
    this.tablist = h("div", { class: "tabs", role: "tablist", "aria-label": "Conversation views" });
    this.tabButtons = {};
    this.panels = {};
    for (const t of TABS) {
      const tabId = uid(`tab-${t.key}`);
      const panelId = uid(`panel-${t.key}`);
      const button = h(
        "button",
        {
          type: "button",
          role: "tab",
          id: tabId,
          "aria-controls": panelId,
          class: "tab",
          dataset: { tab: t.key },
        },
        t.label,
      );
      button.addEventListener("click", () => this.go(t.key));
      this.tabButtons[t.key] = button;
      this.tablist.append(button);
      this.panels[t.key] = h("div", {
        role: "tabpanel",
        id: panelId,
        "aria-labelledby": tabId,
        class: `tabpanel tabpanel-${t.key}`,
        tabindex: "-1",
        hidden: true,
      });
    }
    this.tablist.addEventListener("keydown", (event) => this.onTabKey(event));
    // The snapshot list's failures, apart from the conversation's: a read of the head that
    // goes through does not hide that the list could not be read.
    this.snapshotsError = h("p", { class: "error", role: "alert", hidden: true });
    this.snapshotsErrorView = { showError: (err, prefix) => showErrorIn(this.snapshotsError, err, prefix) };
    this.snapshotsBody = h("div", { class: "snapshots-body" });
    this.panels.snapshots.append(this.snapshotsError, this.snapshotsBody);
    this.notice = h("p", { class: "notice", role: "status", hidden: true });
    this.error = h("p", { class: "error", role: "alert", hidden: true });
    this.el = h(
      "section",
      { class: "detail-pane conversation", "aria-labelledby": "conv-title" },
      this.headEl,
      this.notice,
      this.error,
      this.tablist,
      Object.values(this.panels),
    );
  }

  // -- loading -------------------------------------------------------------------

  async load() {
    if (!(await this.readAndListen(() => this.read()))) return;
    // The transcript and the tree are read later than the head: what the stream replays of
    // that time they may have already, and the handlers below skip what they have.
    this.showTab(this.tab, { focus: false });
  }

  /** Read (`read` resolves to whether it did) and subscribe, in the order that loses no
   * event between the two; resolves to what `read` resolved to. */
  async readAndListen(read) {
    if (this.fromRead()) {
      // Read first, then subscribe from the position the read saw (its eventCursor): the
      // stream replays what was committed in between. Listening first would not do: the page
      // cannot know when the server has its subscription (the protocol acknowledges none),
      // so a write committed after the read but before that was lost until the next reload.
      // A failed read is tried again first: a stream without it would start nowhere.
      const ok = await read();
      if (ok) this.subscribe();
      return ok;
    }
    // A server without the read's position: listen first, read second, and hope that the
    // subscription is in place before anything is written.
    this.subscribe();
    return read();
  }

  /** Whether the stream can start at the position of the page's read. */
  fromRead() {
    return this.app.capabilities.eventCursor && this.app.capabilities.readCursor;
  }

  /** Read the head until a read succeeds (see retry): the first read, a refresh after an
   * event, or a read after events were missed, all one run at a time. Resolves to whether
   * there is a conversation to show (false when it is not found, the token is refused, or
   * the view is closed). */
  async read() {
    const ok = await this.retry(() => this.readHead(), {
      what: "the conversation",
      show: showFailure(this, "this conversation"),
    });
    return ok && Boolean(this.conv);
  }

  /** Run `work` (a read the page needs) until it succeeds: resolves to true then, and to false
   * when the view is closed first or the failure will not pass (a refused token signs out;
   * anything else is given to `show(err, null)`). A failure that may pass (isTransient: the
   * network, a restart, the database away, a rate limit) is given to `show(err, delayMs)` and
   * tried again after the server's Retry-After, else after a delay that doubles up to 30 s
   * (retryDelayMs). Meanwhile the notice says when the next try is, and while a try after a
   * failure (or any, while the page is out of date) is in flight, that `what` is being read.
   * `gone()` says that what is read is no longer shown (a child panel closed): then it is not
   * tried again, nor waited for, and the result is false.
   * One run per `key` (default `what`) at a time: one asked for while another runs joins it,
   * and that one does `work` once more if it had a try in flight (begun before the caller
   * asked, it may miss what the caller knows of). Two runs side by side would share the
   * key's wait and notice: one's wait would replace the other's, which would never resume,
   * and one's success would hide the other's failure. */
  retry(work, { what, key = what, show, gone = () => false }) {
    const running = this.runs.get(key);
    if (running) {
      running.again = true;
      return running.done;
    }
    const run = { again: false, done: null };
    this.runs.set(key, run);
    run.done = this.tryUntilDone(run, work, { what, key, show, gone });
    return run.done;
  }

  async tryUntilDone(run, work, { what, key, show, gone }) {
    try {
      for (let attempt = 0; !this.destroyed && !gone(); attempt += 1) {
        this.setActivity(key, { what, at: null, retrying: attempt > 0 });
        try {
          do {
            run.again = false;
            await work();
          } while (run.again);
          return !this.destroyed;
        } catch (err) {
          if (this.destroyed || gone()) return false;
          if (err instanceof AuthError) {
            this.app.onAuthError(err);
            return false;
          }
          if (!isTransient(err)) {
            show(err, null);
            return false;
          }
          const delay = retryDelayMs(err, attempt);
          show(err, delay);
          await this.wait(delay, { what, key });
        }
      }
      return false;
    } finally {
      // In the same task as the last look at `again`: a caller from now on starts a new run.
      this.runs.delete(key);
      this.setActivity(key, null);
    }
  }

  /** One read of the head; throws what the request throws. */
  async readHead() {
    const withCursor = this.fromRead();
    const data = await this.app.request(conversationQuery({ withCursor }), { id: this.id });
    if (this.destroyed) return;
    // Only a read made before subscribing says where the stream starts; once it runs, the
    // last event handled does (a later read may be ahead of events still on their way).
    if (withCursor && !this.unsubscribe && data.conversation) {
      this.lastCursor = data.conversation.eventCursor;
    }
    if (!data.conversation) {
      this.conv = null;
      fill(this.headEl,
        h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← Conversations")),
        h("h2", { id: "conv-title", tabindex: "-1" }, "Not found"),
      );
      this.showError(new Error("There is no conversation with this id that this token may read."));
      this.tablist.hidden = true;
      return;
    }
    this.conv = data.conversation;
    this.renderHead();
    this.showError(null);
    // Its row in the list shows what this read saw (a rename, an update made elsewhere).
    const { title, messageCount, updatedAt } = this.conv;
    this.app.listTouch(this.id, { title, messageCount, updatedAt });
  }

  /** Resolves after `ms`, or once endWait(key); the notice saying meanwhile when `what` is
   * read next (the caller says when the read starts). Never, when the view is closed first
   * (destroy clears the timer). */
  wait(ms, { what, key = what }) {
    this.setActivity(key, { what, at: Date.now() + ms });
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.endWait(key), ms);
      this.waits.set(key, { timer, resolve });
    });
  }

  endWait(key) {
    const wait = this.waits.get(key);
    if (!wait) return;
    this.waits.delete(key);
    clearTimeout(wait.timer);
    wait.resolve();
  }

  showError(err, prefix = "") {
    showErrorIn(this.error, err, prefix);
  }

  /** Say why the page is not current, or not live (a sentence without its full stop), or
   * nothing (null); what is being done about it follows (renderNotice). */
  showNotice(text) {
    this.why = text || null;
    this.renderNotice();
  }

  setActivity(key, activity) {
    if (activity) this.activities.set(key, activity);
    else this.activities.delete(key);
    this.renderNotice();
  }

  /** The notice: `why`, then what is being read again (in flight), or when it will be. A
   * wait is counted down in a part of its own that screen readers do not announce at each
   * tick (the notice is a live region): they hear the wait once, as it starts. */
  renderNotice() {
    clearTimeout(this.tickTimer);
    if (this.destroyed) return; // a read that ends after the view closed: no countdown to run
    const parts = [];
    for (const { what, at, retrying } of this.activities.values()) {
      if (at === null) {
        // A first try is no news, unless the page says that it is not current.
        if (retrying || this.why) parts.push([`reading ${what} again…`]);
      } else {
        const left = h("span", { class: "countdown", "aria-live": "off", dataset: { at: String(at) } },
          `${seconds(at - Date.now())} s`);
        parts.push([`will read ${what} again in `, left]);
      }
    }
    const children = [];
    if (this.why) children.push(this.why);
    parts.forEach((part, i) => {
      if (children.length) children.push("; ");
      // Without a reason first, the sentence starts here.
      if (!this.why && i === 0) part[0] = part[0][0].toUpperCase() + part[0].slice(1);
      children.push(...part);
    });
    const last = children[children.length - 1];
    if (children.length && !(typeof last === "string" && last.endsWith("…"))) children.push(".");
    if (children.length) fill(this.notice, children);
    else this.notice.replaceChildren();
    this.notice.hidden = !children.length;
    this.tick();
  }

  /** Count the notice's waits down: "in 3 s", "in 2 s", "in 1 s", each second on the second. */
  tick() {
    clearTimeout(this.tickTimer);
    let next = Infinity;
    for (const el of this.notice.querySelectorAll(".countdown")) {
      const left = Number(el.dataset.at) - Date.now();
      const s = seconds(left);
      if (el.textContent !== `${s} s`) el.textContent = `${s} s`;
      // The next tick: when what is left drops below s - 1 seconds.
      if (s > 1) next = Math.min(next, left - (s - 1) * 1000);
    }
    if (next !== Infinity) this.tickTimer = setTimeout(() => this.tick(), Math.max(1, next));
  }

  renderHead() {
    const c = this.conv;
    const crumbs = h("p", { class: "crumbs" }, h("a", { href: "#/", class: "back" }, "← Conversations"));
    const parent = c.parentDelegation;
    if (parent) {
      crumbs.append(
        " / ",
        h("a", { href: `#/c/${encodeURIComponent(parent.parentConversation.id)}/tree` },
          parent.parentConversation.title || "Parent conversation"),
        " / ",
        h("span", {}, `${parent.delegatingTier} → ${parent.targetTier} `),
        statusBadge(parent.status),
      );
    }
    const now = Date.now();
    const locked = c.lockedUntil && Date.parse(c.lockedUntil) > now;
    const fact = (term, ...value) => h("div", { class: "fact" }, h("dt", {}, term), h("dd", {}, ...value));
    const facts = h(
      "dl",
      { class: "facts" },
      fact("Agent", c.agentSlug || h("span", { class: "muted" }, "none")),
      fact("Context", c.context, c.interactive ? h("span", { class: "muted" }, " (interactive)") : null),
      fact("Owner type", c.ownerType.toLowerCase()),
      fact("Messages", formatNumber(c.messageCount)),
      fact("Version", String(c.version)),
      fact("Created", timeEl(c.createdAt)),
      fact("Updated", timeEl(c.updatedAt)),
      fact(
        "Lock",
        locked
          ? h("span", { class: "warn" }, "Locked until ", timeEl(c.lockedUntil, { absolute: true }))
          : c.lockedUntil
            ? h("span", {}, "Expired ", timeEl(c.lockedUntil))
            : h("span", { class: "muted" }, "Not locked"),
      ),
      fact("Expires", c.expiresAt ? timeEl(c.expiresAt, { absolute: true }) : h("span", { class: "muted" }, "Never")),
      c.provider || c.model ? fact("Model", [c.provider, c.model].filter(Boolean).join(" / ")) : null,
      fact("Id", h("code", { class: "id" }, c.id)),
    );
    fill(this.headEl,
      crumbs,
      h("h2", { id: "conv-title", tabindex: "-1" }, c.title || "Untitled"),
      facts,
      c.metadata && Object.keys(c.metadata).length ? jsonDetails("Metadata", c.metadata) : null,
    );
    this.tabButtons.transcript.textContent = `Transcript (${formatNumber(c.messageCount)})`;
    this.tabButtons.tree.textContent = `Delegations (${formatNumber(c.delegations.totalCount)})`;
    this.tabButtons.snapshots.textContent = `Snapshots (${formatNumber(c.snapshots.totalCount)})`;
    this.tablist.hidden = false;
  }

  focusTitle() {
    const title = this.headEl.querySelector("h2");
    if (title) title.focus();
  }

  // -- tabs ----------------------------------------------------------------------

  go(tab) {
    const suffix = tab === "transcript" ? "" : `/${tab}`;
    const hash = `#/c/${encodeURIComponent(this.id)}${suffix}`;
    if (window.location.hash !== hash) window.location.hash = hash; // the router calls showTab
    else this.showTab(tab);
  }

  showTab(tab, { focus = true } = {}) {
    this.tab = TABS.some((t) => t.key === tab) ? tab : "transcript";
    for (const t of TABS) {
      const selected = t.key === this.tab;
      this.tabButtons[t.key].setAttribute("aria-selected", String(selected));
      this.tabButtons[t.key].tabIndex = selected ? 0 : -1;
      this.panels[t.key].hidden = !selected;
    }
    if (!this.conv) return;
    if (this.tab === "transcript" && !this.transcript) {
      this.transcript = new TranscriptView({
        request: this.app.request,
        conversationId: this.id,
        onCount: (n) => this.countChanged(this.id, n),
      });
      this.panels.transcript.append(this.transcript.el);
      this.reloadTranscript(this.transcript);
    }
    if (this.tab === "tree" && !this.tree) this.buildTree();
    if (this.tab === "snapshots" && !this.snapshotsLoaded) this.loadSnapshots();
    if (focus) this.tabButtons[this.tab].focus();
  }

  onTabKey(event) {
    const keys = TABS.map((t) => t.key);
    const i = keys.indexOf(this.tab);
    let next = null;
    if (event.key === "ArrowRight") next = keys[(i + 1) % keys.length];
    else if (event.key === "ArrowLeft") next = keys[(i - 1 + keys.length) % keys.length];
    else if (event.key === "Home") next = keys[0];
    else if (event.key === "End") next = keys[keys.length - 1];
    if (next) {
      event.preventDefault();
      this.go(next);
    }
  }

  // -- delegation tree and the child-transcript panel ----------------------------

  buildTree() {
    this.panelSlot = h("div", { class: "panel-slot" });
    // Empty until the first read (reloadTree) succeeds; it shows that read's failures.
    this.mountTree(this.newTree());
    this.reloadTree();
  }

  newTree() {
    return new DelegationTree({
      request: this.app.request,
      root: { id: this.id, title: this.conv.title, messageCount: this.conv.messageCount },
      onOpen: (node) => this.openPanel(node),
      onAuthError: (err) => this.app.onAuthError(err),
    });
  }

  /** Show `tree` in the Delegations tab, beside the panel's slot, in place of the one shown. */
  mountTree(tree) {
    if (this.tree) this.tree.destroy();
    this.tree = tree;
    fill(this.panels.tree, h("div", { class: "tree-layout" }, tree.el, this.panelSlot));
    // Behind an open panel that covers the screen, the new tree is inert as the old one was.
    if (this.panel) this.setBehindInert(OVERLAY.matches);
  }

  /** Read the tree again until a read succeeds (see retry); its failures are shown in the tree
   * shown meanwhile, with the time of the next try. One run at a time ("the tree"): a reload
   * asked for while one runs makes that one read once more when it is done, instead of a
   * second reload beside it, which would take what was unfolded from a tree not loaded yet,
   * and have the first one go on with a tree not its own. */
  reloadTree() {
    if (!this.tree || this.destroyed) return Promise.resolve(false);
    return this.retry(() => this.readTree(), {
      what: "the delegation tree",
      key: "the tree",
      // The tree shown when the failure comes (a reload replaces it only once it is read).
      show: (err, delay) => showFailure(this.tree, "the delegation tree")(err, delay),
    });
  }

  /** One read of the tree: a new one, loaded with what the reader had unfolded beyond the
   * first two levels, then shown in place of the old one (which stays, with its failure, if
   * a read fails); throws what a read throws. */
  async readTree() {
    const old = this.tree;
    const unfolded = new Set(
      [...old.nodes.values()].filter((n) => n.loaded && n.expanded && n.children.length).map((n) => n.id),
    );
    const tree = this.newTree();
    try {
      await tree.load({ raise: true });
      for (let round = 0; round < 50 && !this.destroyed; round += 1) {
        const again = [...tree.nodes.values()].filter((n) => !n.loaded && unfolded.has(n.id));
        if (!again.length) break;
        await Promise.all(again.map((n) => tree.loadChildren(n, { raise: true })));
      }
    } catch (err) {
      tree.destroy();
      throw err;
    }
    // A closed view shows nothing more (destroy stopped the old tree, not this one).
    if (this.destroyed) {
      tree.destroy();
      return;
    }
    if (unfolded.size) tree.render();
    const active = document.activeElement;
    const focusKey = active && old.el.contains(active) ? active.dataset.focusKey : null;
    this.mountTree(tree);
    if (focusKey) {
      const el = tree.el.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`);
      if (el) el.focus();
    }
    if (this.panel) {
      const node = tree.nodes.get(this.panel.node.id);
      if (node) {
        this.panel.node = node;
        tree.setCurrent(node);
      }
    }
  }

  openPanel(node) {
    if (node.isRoot) {
      this.go("transcript");
      return;
    }
    this.closePanel({ restoreFocus: false });
    const d = node.d;
    const titleId = uid("panel-title");
    const transcript = new TranscriptView({
      request: this.app.request,
      conversationId: node.childId,
      label: `Transcript of ${d.targetTier}`,
      onCount: (n) => this.tree && this.tree.messagesAppended(node.childId, n),
    });
    const close = h("button", { type: "button", class: "quiet close", "aria-label": "Close the transcript panel" }, "×");
    close.addEventListener("click", () => this.closePanel());
    const status = h("span", { class: "panel-status" }, statusBadge(d.status));
    const el = h(
      "aside",
      { class: "panel", role: "region", "aria-labelledby": titleId },
      h(
        "div",
        { class: "panel-head" },
        h("h3", { id: titleId, tabindex: "-1" }, `${d.delegatingTier} → ${d.targetTier}`),
        close,
      ),
      h("p", { class: "panel-task" }, shorten(d.task, 300)),
      h(
        "p",
        { class: "panel-links" },
        status,
        h("a", { href: `#/c/${encodeURIComponent(node.childId)}` }, "Open as its own conversation"),
      ),
      transcript.el,
    );
    this.panel = { node, transcript, el, status };
    fill(this.panelSlot, el);
    this.panelSlot.classList.add("open");
    this.tree.setCurrent(node);
    this.setBehindInert(OVERLAY.matches);
    el.querySelector("h3").focus();
    this.reloadTranscript(transcript);
    announce(`Transcript of ${d.targetTier} opened`);
  }

  /** Close the child panel; false when there was none (Escape then closes the view). */
  closePanel({ restoreFocus = true } = {}) {
    if (!this.panel) return false;
    const { node, transcript } = this.panel;
    transcript.destroy();
    // A read of it that waits, or is on its way, will not be tried again (reloadTranscript):
    // the notice forgets it now.
    this.endWait(transcript);
    this.setActivity(transcript, null);
    this.panel = null;
    this.panelSlot.replaceChildren();
    this.panelSlot.classList.remove("open");
    this.setBehindInert(false);
    if (this.tree) {
      this.tree.setCurrent(null);
      if (restoreFocus) {
        const button = node.li && node.li.querySelector(".tnode-open");
        if (button) button.focus();
      }
    }
    return true;
  }

  setBehindInert(on) {
    const behind = [
      document.querySelector("[data-skip]"),
      document.querySelector(".topbar"),
      document.getElementById("figures"),
      document.querySelector(".list-pane"),
      this.headEl,
      this.tablist,
      this.tree && this.tree.el,
    ];
    for (const el of behind) if (el) el.inert = on;
  }

  // -- snapshots -----------------------------------------------------------------

  /** Read the snapshot list (again) until a read succeeds (see retry); its failures are shown
   * in the tab, with the time of the next try. One run at a time ("the snapshots"): saves in a
   * row read it again after the read in flight, whose older answer is then never shown last. */
  async loadSnapshots() {
    this.snapshotsLoaded = true;
    const ok = await this.retry(() => this.readSnapshots(), {
      what: "the snapshots",
      show: showFailure(this.snapshotsErrorView, "the snapshots"),
    });
    // Not read (a failure that will not pass): the next visit to the tab tries again.
    if (!ok) this.snapshotsLoaded = false;
  }

  /** One read of a page of the snapshot list: the first (the list drawn anew), or the one
   * `after` (added to `list`, the list drawn with the page before it); throws what the
   * request throws. */
  async readSnapshots(after = null, list = null) {
    // A list shown stays until the new one is read (and while a read of it fails).
    if (!after && !this.snapshotsBody.querySelector("ol.snapshots")) {
      fill(this.snapshotsBody, h("p", { class: "muted" }, "Loading…"));
    }
    const data = await this.app.request(SNAPSHOTS, { id: this.id, after });
    const conn = data.conversation && data.conversation.snapshots;
    // A next page of a list drawn anew since belongs to no list shown.
    if (!conn || this.destroyed || (list && !list.isConnected)) return;
    let into = list;
    if (!after) {
      into = h("ol", { class: "snapshots", "aria-label": "Compaction snapshots" });
      fill(this.snapshotsBody,
        h("p", { class: "muted" }, conn.totalCount
          ? `${formatNumber(conn.totalCount)} compaction snapshot${conn.totalCount === 1 ? "" : "s"}: the full history as it stood before each compaction.`
          : "No compaction snapshots."),
        into,
      );
    }
    this.snapshotsBody.querySelectorAll(".snapshots-more").forEach((b) => b.remove());
    for (const s of conn.nodes) into.append(this.snapshotItem(s));
    if (conn.pageInfo.hasNextPage) {
      const more = h("button", { type: "button", class: "quiet snapshots-more" }, "Load more snapshots");
      more.addEventListener("click", () => {
        more.disabled = true;
        const show = showFailure(this.snapshotsErrorView, "more snapshots");
        this.retry(() => this.readSnapshots(conn.pageInfo.endCursor, into), { what: "more snapshots", show })
          .then(() => { more.disabled = false; });
      });
      this.snapshotsBody.append(more);
    }
    showErrorIn(this.snapshotsError, null);
  }

  /** Snapshots were saved: the list is read again if it is shown, else when it is next. */
  snapshotsChanged() {
    if (this.tab === "snapshots") this.loadSnapshots();
    else this.snapshotsLoaded = false;
  }

  snapshotItem(s) {
    const body = h("div", { class: "snapshot-body" }, h("p", { class: "muted" }, "Loading…"));
    const details = h(
      "details",
      { class: "snapshot" },
      h("summary", {}, `${formatNumber(s.messageCount)} messages, saved `, timeEl(s.createdAt)),
      body,
    );
    let loaded = false;
    details.addEventListener("toggle", async () => {
      if (!details.open || loaded) return;
      loaded = true;
      try {
        const data = await this.app.request(SNAPSHOT, { id: s.id });
        const messages = (data.node && data.node.messages) || [];
        const list = h("ol", { class: "messages" });
        const shown = Array.isArray(messages) ? messages.slice(0, SNAPSHOT_RENDER_LIMIT) : [];
        shown.forEach((m, i) => list.append(renderMessage({ seq: i + 1, role: m && m.role, data: m })));
        fill(body, list);
        if (Array.isArray(messages) && messages.length > shown.length) {
          body.append(h("p", { class: "muted" }, `The first ${shown.length} of ${formatNumber(messages.length)} messages; the rest in the raw JSON below.`));
        }
        const raw = h("details", { class: "json-details" }, h("summary", {}, "Raw JSON of the snapshot"));
        raw.addEventListener("toggle", () => {
          if (raw.open && raw.childElementCount === 1) {
            raw.append(h("pre", { class: "json", tabindex: "0" }, toJSONText(messages)));
          }
        });
        body.append(raw);
      } catch (err) {
        loaded = false;
        fill(body, h("p", { class: "error" }, describeError(err)));
        if (err instanceof AuthError) this.app.onAuthError(err);
      }
    });
    return h("li", {}, details);
  }

  // -- live ----------------------------------------------------------------------

  subscribe() {
    const withCursor = this.app.capabilities.eventCursor;
    const query = eventsSubscription({ withCursor, withCount: this.app.capabilities.eventMessageCount });
    this.subscribedAt = Date.now();
    this.unsubscribe = this.app.ws.subscribe(
      {
        query,
        variables: () =>
          withCursor && this.lastCursor ? { id: this.id, after: this.lastCursor } : { id: this.id },
      },
      {
        next: (payload) => {
          if (payload.errors && payload.errors.length) {
            this.streamEnded(payload.errors);
            return;
          }
          const event = payload.data && payload.data.conversationEvents;
          if (event) this.handle(event);
        },
        error: (errors) => this.streamRefused(errors),
        complete: () => this.streamEnded([]),
        onReconnect: () => {
          // Without cursors the stream cannot say what was missed: read it all again.
          if (!withCursor || !this.lastCursor) this.resync();
        },
      },
    );
  }

  /** The server answered the `subscribe` with an `error`. Refused before it started, for a
   * limit of the token's or the socket's (LIMIT_EXCEEDED, RATE_LIMITED), the stream missed
   * nothing past the page's cursor: wait, then subscribe again from it, without reading the
   * page again (which each refusal would otherwise repeat, whole transcripts included). */
  async streamRefused(errors) {
    const list = Array.isArray(errors) ? errors : [errors];
    const limit = list.find((e) => e && e.extensions && NOT_STARTED_CODES.has(e.extensions.code));
    if (!limit || !this.lastCursor || this.destroyed) {
      this.streamEnded(errors);
      return;
    }
    if (this.unsubscribe) this.unsubscribe();
    this.unsubscribe = null;
    this.showNotice(`Live updates paused: ${limit.message}`);
    const failures = this.streamFailed();
    await this.wait(retryDelayMs(new GraphQLError(list), failures), { what: "live updates", key: "subscribe" });
    this.setActivity("subscribe", null);
    if (this.destroyed) return;
    this.showNotice(null);
    this.subscribe();
  }

  /** Count a stream that failed: how many failed in a row before it (each within
   * STREAM_SETTLED_MS of its subscribe), which the next wait backs off by. */
  streamFailed() {
    const quick = Date.now() - this.subscribedAt < STREAM_SETTLED_MS;
    const failures = quick ? this.streamFailures : 0;
    this.streamFailures = failures + 1;
    return failures;
  }

  /** The stream ended: with errors, or completed by the server (it stops, or the
   * conversation was deleted). */
  streamEnded(errors) {
    if (this.destroyed) return;
    this.streamEnds += 1;
    if (this.unsubscribe) this.unsubscribe();
    this.unsubscribe = null;
    const list = Array.isArray(errors) ? errors : [errors];
    if (!list.length && this.deleted) return; // the delete's own end: the notice says so already
    const final = list.find((e) => e && (e.final || (e.extensions && FINAL_CODES.has(e.extensions.code))));
    if (final) {
      const gone = final.extensions && final.extensions.code === "NOT_FOUND";
      const why = gone ? "this conversation was deleted, or this token may no longer read it" : final.message;
      this.showNotice(`Live updates stopped: ${why}`);
      return;
    }
    this.catchUp(list.length ? new GraphQLError(list) : null);
  }

  /** Events may have been missed (the cursor older than the log, the stream cut off, the server
   * stopping): say that the page is out of date, read everything again (until a read
   * succeeds), and only then listen again, from that read's position. Listening before, from
   * the old position or from none, would show a state that silently lacks what came between. */
  async catchUp(err) {
    const end = this.streamEnds;
    this.lastCursor = null;
    const code = err instanceof GraphQLError ? err.errors.map((e) => e.extensions && e.extensions.code).find((c) => c in STREAM_END_TEXT) : undefined;
    const why = code ? STREAM_END_TEXT[code] : err ? describeError(err) : "the server ended them";
    this.showNotice(`Out of date: live updates stopped (${why})`);
    // A stream that fails again at once must not turn into a loop of reads: from the second
    // failure in a row, wait as after a failed read (and always as long as the server asks).
    const failures = this.streamFailed();
    const asked = err && err.retryAfterMs !== null;
    if (failures || asked) {
      // A key of its own: a read of the head (after an event) may be waiting too.
      const delay = retryDelayMs(err, Math.max(0, failures - 1));
      await this.wait(delay, { what: "the conversation", key: "catch-up" });
      // Gone from the notice as the read starts, in the same task: no notice in between.
      this.setActivity("catch-up", null);
    }
    if (this.destroyed) return;
    const ok = await this.readAndListen(() => this.resync());
    // Without the read's position the page listens before it reads, so the new stream can
    // end while this read is on its way: then that end says what the page is, not this read.
    if (end !== this.streamEnds) return;
    // No read (the conversation gone, say): the error says why; no more reading is going on.
    this.showNotice(ok ? null : "Live updates stopped");
  }

  /** Read everything again: the head, then the transcripts, each until a read succeeds; false
   * when it cannot (the conversation gone, the token refused, the view closed). A stream
   * started before the transcripts are read again would leave a transcript that failed stale
   * for good: what was written before the head's read is in no event of it. */
  async resync() {
    if (this.destroyed || !(await this.read())) return false;
    const transcripts = [this.transcript, this.panel && this.panel.transcript].filter(Boolean);
    const reloads = transcripts.map((t) => this.reloadTranscript(t));
    if (this.tree) this.refreshTree();
    this.snapshotsChanged(); // a list loaded before may lack what was saved meanwhile
    this.app.figuresChanged();
    // A transcript refused for good (its conversation deleted since the head's read, say)
    // says so; the stream that follows ends with the same refusal.
    await Promise.all(reloads);
    return !this.destroyed;
  }

  /** Read a transcript's latest messages (again) until a read succeeds, as read() reads the
   * head (see retry); its failures are shown in it, with the time of the next try. Resolves
   * to whether it was read. One reload per transcript at a time (retry's key). */
  reloadTranscript(transcript, { kept } = {}) {
    const what = `the ${transcript.label.charAt(0).toLowerCase()}${transcript.label.slice(1)}`;
    const show = showFailure(transcript, what);
    const gone = () => transcript.destroyed;
    return this.retry(() => transcript.refresh({ kept }), { what, key: transcript, show, gone });
  }

  /** A fact of the head, shown anew without reading the conversation again. */
  setFact(term, ...value) {
    const dt = [...this.headEl.querySelectorAll(".facts dt")].find((x) => x.textContent === term);
    if (dt) fill(dt.nextElementSibling, ...value);
  }

  /** An event of this conversation that the head is not read again for (an append) moved
   * its version and its last update: the head shows them. */
  moved(version, at) {
    if (!this.conv || typeof version !== "number" || version <= this.conv.version) return;
    this.conv.version = version;
    this.setFact("Version", String(version));
    if (at) {
      this.conv.updatedAt = at;
      this.setFact("Updated", timeEl(at));
    }
  }

  countChanged(conversationId, count, at = null) {
    if (typeof count !== "number") return;
    if (conversationId === this.id && this.conv && count !== this.conv.messageCount) {
      this.conv.messageCount = count;
      this.tabButtons.transcript.textContent = `Transcript (${formatNumber(count)})`;
      this.setFact("Messages", formatNumber(count));
    }
    this.app.listTouch(conversationId, at ? { messageCount: count, updatedAt: at } : { messageCount: count });
    if (this.tree) this.tree.messagesAppended(conversationId, count);
  }

  handle(event) {
    if (this.destroyed) return;
    if (event.cursor) this.lastCursor = event.cursor;
    const cid = event.conversationId;
    const here = cid === this.id;
    const inPanel = this.panel && this.panel.node.childId === cid;
    switch (event.kind) {
      case "MESSAGES_APPENDED": {
        const messages = event.messages || [];
        const count = messages.length ? Math.max(...messages.map((m) => m.seq)) : null;
        if (here && this.transcript) this.transcript.appended(messages);
        if (inPanel) this.panel.transcript.appended(messages);
        if (here) this.moved(event.version, event.at);
        this.countChanged(cid, count, event.at);
        break;
      }
      case "TRANSCRIPT_REPLACED": {
        // The replace kept the transcript's first `kept` messages as they were (null: not
        // known); the rest of a window is read again.
        const count = event.messageCount;
        const kept = typeof count === "number" ? count - (event.messages || []).length : null;
        if (here && this.transcript) this.reloadTranscript(this.transcript, { kept });
        if (inPanel) this.reloadTranscript(this.panel.transcript, { kept });
        if (here) this.refreshHead();
        this.countChanged(cid, count, event.at);
        if (this.tree) this.refreshTree();
        break;
      }
      case "DELEGATION_CREATED":
      case "DELEGATION_COMPLETED": {
        const d = event.delegation;
        if (!d) break;
        if (this.tree) {
          const known = event.kind === "DELEGATION_CREATED" ? this.tree.delegationCreated(d) : this.tree.delegationUpdated(d);
          if (!known && event.kind === "DELEGATION_COMPLETED") this.refreshTree();
        }
        if (this.panel && this.panel.node.id === d.id) {
          fill(this.panel.status, statusBadge(d.status));
        }
        if (d.parentConversation && d.parentConversation.id === this.id) this.refreshHead();
        if (event.kind === "DELEGATION_COMPLETED") {
          announce(`Delegation to ${d.targetTier} ${STATUS_TEXT[d.status] ? STATUS_TEXT[d.status].toLowerCase() : d.status}`);
        }
        break;
      }
      case "SNAPSHOT_SAVED":
        if (here) {
          this.refreshHead();
          this.snapshotsChanged();
        }
        break;
      case "CONVERSATION_UPDATED":
        if (here) this.refreshHead();
        break;
      case "CONVERSATION_DELETED":
        this.app.listRemove(cid);
        if (here) {
          this.deleted = true;
          this.showNotice("This conversation has just been deleted");
        } else {
          if (inPanel) {
            // Its transcript is gone: the panel would go on showing it as it was, running.
            const within = this.panel.el.contains(document.activeElement);
            const { targetTier } = this.panel.node.d;
            this.closePanel({ restoreFocus: false });
            if (within) this.focusTitle();
            announce(`The transcript of ${targetTier} was deleted`);
          }
          if (this.tree) this.refreshTree();
        }
        break;
      default:
        break;
    }
    this.app.figuresChanged();
  }

  destroy() {
    this.destroyed = true;
    for (const { timer } of this.waits.values()) clearTimeout(timer);
    clearTimeout(this.tickTimer);
    OVERLAY.removeEventListener("change", this.onOverlayChange);
    if (this.unsubscribe) this.unsubscribe();
    if (this.transcript) this.transcript.destroy();
    if (this.panel) {
      this.panel.transcript.destroy();
      this.setBehindInert(false);
    }
    if (this.tree) this.tree.destroy();
    this.refreshHead.cancel();
    this.refreshTree.cancel();
  }
}
