// A transcript of any length, loaded in windows: pages of PAGE messages through
// `messages(first/after)` and `messages(last/before)`, at most MAX_RENDERED in the page at
// once (the far end is dropped as the reader moves on), so 10,000 messages cost what 300 do.
// It opens at the latest messages, as a chat does; live messages are added at the end.

import { announce, formatNumber, h } from "./dom.js";
import { showErrorIn } from "./gql.js";
import { renderMessage } from "./messages.js";
import { MESSAGES_FIRST, MESSAGES_LAST } from "./queries.js";

const PAGE = 100;
const MAX_RENDERED = 300;

/** The element whose scrolling moves `el`: a scrolling pane, or the document. */
function scrollParent(el) {
  for (let p = el.parentElement; p; p = p.parentElement) {
    const style = getComputedStyle(p);
    if (/(auto|scroll)/.test(style.overflowY) && p.scrollHeight > p.clientHeight) return p;
  }
  return document.scrollingElement || document.documentElement;
}

/**
 * Run `mutate` (messages added or dropped above or below) without moving what the reader
 * sees: `anchor` (an element that stays) is put back where it was on the screen. The
 * browser's own scroll anchoring would often pick the "load earlier" button as its anchor and
 * keep that in view, loading page after page.
 */
function keepInPlace(anchor, mutate) {
  const before = anchor.getBoundingClientRect().top;
  mutate();
  if (!anchor.isConnected) return;
  const shift = anchor.getBoundingClientRect().top - before;
  if (shift) scrollParent(anchor).scrollTop += shift;
}

export class TranscriptView {
  /** request: the GraphQL request function; onCount(n): the conversation's message count. */
  constructor({ request, conversationId, label = "Transcript", onCount }) {
    this.request = request;
    this.conversationId = conversationId;
    this.label = label;
    this.onCount = onCount || (() => {});
    this.items = []; // [{seq, cursor, li}], in order
    this.hasBefore = false;
    this.hasAfter = false;
    this.total = 0;
    this.loading = false;
    this.idle = Promise.resolve(); // resolves when the load in flight ends
    // A jump asked for while a load is in flight: it runs when that load ends.
    this.pendingJump = null;
    this.unseen = 0;
    this.nearEnd = true;
    this.destroyed = false;

    this.status = h("p", { class: "transcript-status", "aria-live": "polite" });
    this.firstButton = h("button", { type: "button", class: "quiet small" }, "First messages");
    this.latestButton = h("button", { type: "button", class: "quiet small" }, "Latest messages");
    this.firstButton.addEventListener("click", () => this.jump("first"));
    this.latestButton.addEventListener("click", () => this.jump("latest"));
    this.earlier = h("button", { type: "button", class: "quiet load-edge" }, "Load earlier messages");
    this.later = h("button", { type: "button", class: "quiet load-edge" }, "Load later messages");
    this.earlier.addEventListener("click", () => this.loadEarlier());
    this.later.addEventListener("click", () => this.loadLater());
    this.newBelow = h("button", { type: "button", class: "new-below", hidden: true });
    this.newBelow.addEventListener("click", () => this.jump("latest"));
    this.list = h("ol", { class: "messages", "aria-label": label });
    this.error = h("p", { class: "error", role: "alert", hidden: true });
    // Always there (the "load later" button hides): tells whether the reader is at the end.
    this.endMarker = h("div", { class: "end-marker", "aria-hidden": "true" });
    this.el = h(
      "section",
      { class: "transcript", "aria-label": label },
      h("div", { class: "transcript-bar" }, this.status, this.firstButton, this.latestButton),
      this.error,
      this.earlier,
      this.list,
      this.later,
      this.endMarker,
      this.newBelow,
    );
    this.observer = new IntersectionObserver((entries) => this.onIntersect(entries), {
      rootMargin: "400px 0px",
    });
    this.observer.observe(this.earlier);
    this.observer.observe(this.later);
    this.observer.observe(this.endMarker);
    this.syncTail = this.syncTail.bind(this);
    this.syncTimer = null;
  }

  destroy() {
    this.destroyed = true;
    this.observer.disconnect();
    clearTimeout(this.syncTimer);
  }

  get lastSeq() {
    return this.items.length ? this.items[this.items.length - 1].seq : 0;
  }

  onIntersect(entries) {
    for (const entry of entries) {
      if (entry.target === this.endMarker) this.nearEnd = entry.isIntersecting;
      if (!entry.isIntersecting || this.loading) continue;
      if (entry.target === this.earlier && this.hasBefore) this.loadEarlier();
      if (entry.target === this.later && this.hasAfter) this.loadLater();
    }
  }

  async fetch(query, variables) {
    const data = await this.request(query, { id: this.conversationId, ...variables });
    if (!data.conversation) throw new Error("This conversation no longer exists.");
    return data.conversation;
  }

  showError(err, prefix = "") {
    showErrorIn(this.error, err, prefix);
  }

  /** Run a load (one at a time): its failure is shown, or with `raise` thrown for the caller
   * to show (a refused token is always thrown). */
  async guard(work, { raise = false } = {}) {
    if (this.loading || this.destroyed) return;
    this.loading = true;
    let loaded;
    this.idle = new Promise((resolve) => {
      loaded = resolve;
    });
    this.el.setAttribute("aria-busy", "true");
    try {
      await work();
      this.showError(null);
    } catch (err) {
      if (raise || (err && err.name === "AuthError")) throw err;
      this.showError(err);
    } finally {
      this.loading = false;
      loaded();
      this.el.removeAttribute("aria-busy");
      this.update();
      if (this.pendingJump && !this.destroyed) {
        const { where, focus } = this.pendingJump;
        this.pendingJump = null;
        this.jump(where, { focus });
      }
      if (!this.destroyed) {
        // An edge still in view after a load would not be reported again: observe anew, so
        // that the observer says once more where the edges are.
        for (const edge of [this.earlier, this.later]) {
          this.observer.unobserve(edge);
          this.observer.observe(edge);
        }
      }
    }
  }

  async jump(where, { focus = true, raise = false } = {}) {
    if (this.loading) {
      // The reader's click must not be lost to a page the observer is loading: it waits.
      this.pendingJump = { where, focus };
      return;
    }
    await this.guard(async () => {
      const conv =
        where === "first"
          ? await this.fetch(MESSAGES_FIRST, { first: PAGE })
          : await this.fetch(MESSAGES_LAST, { last: PAGE });
      const page = conv.messages;
      this.total = page.totalCount;
      this.onCount(conv.messageCount);
      // The messages are drawn anew (a replace, events missed): the keyboard's focus, when
      // it was on one of them, comes back to the message of the same seq, not to the page's
      // start.
      const active = document.activeElement;
      const held = this.list.contains(active) ? this.items.find((i) => i.li.contains(active)) : null;
      this.items = [];
      this.list.replaceChildren();
      this.add(page.edges, "end");
      const again = held && !focus ? this.items.find((i) => i.seq === held.seq) : null;
      if (again) {
        const article = again.li.firstElementChild;
        article.tabIndex = -1;
        article.focus({ preventScroll: true });
      }
      this.hasBefore = where === "first" ? false : page.pageInfo.hasPreviousPage;
      this.hasAfter = where === "first" ? page.pageInfo.hasNextPage : false;
      this.unseen = 0;
    }, { raise });
    if (this.destroyed) return;
    const target = where === "first" ? this.items[0] : this.items[this.items.length - 1];
    if (target) {
      target.li.scrollIntoView({ block: where === "first" ? "start" : "end" });
      if (focus) {
        const article = target.li.firstElementChild;
        article.tabIndex = -1;
        article.focus({ preventScroll: true });
      }
    }
  }

  async loadEarlier() {
    const first = this.items[0];
    if (!first || !first.cursor) return;
    await this.guard(async () => {
      const conv = await this.fetch(MESSAGES_LAST, { last: PAGE, before: first.cursor });
      this.total = conv.messages.totalCount;
      keepInPlace(first.li, () => {
        this.add(conv.messages.edges, "start");
        this.trim("end");
      });
      this.hasBefore = conv.messages.pageInfo.hasPreviousPage;
    });
  }

  async loadLater() {
    const last = this.lastCursored();
    if (!last) return;
    await this.guard(async () => {
      const conv = await this.fetch(MESSAGES_FIRST, { first: PAGE, after: last.cursor });
      this.total = conv.messages.totalCount;
      keepInPlace(last.li, () => {
        this.add(conv.messages.edges, "end");
        this.trim("start");
      });
      this.hasAfter = conv.messages.pageInfo.hasNextPage;
      if (!this.hasAfter) this.unseen = 0;
    });
  }

  lastCursored() {
    for (let i = this.items.length - 1; i >= 0; i -= 1) if (this.items[i].cursor) return this.items[i];
    return null;
  }

  /** Insert edges ({cursor, node}) or bare messages (cursor null), skipping seqs we have. */
  add(edges, where) {
    const have = new Set(this.items.map((i) => i.seq));
    const fresh = [];
    for (const edge of edges) {
      const node = edge.node || edge;
      const cursor = edge.node ? edge.cursor : null;
      if (have.has(node.seq)) {
        if (cursor) {
          const known = this.items.find((i) => i.seq === node.seq);
          if (known) known.cursor = cursor;
        }
        continue;
      }
      have.add(node.seq);
      fresh.push({ seq: node.seq, cursor, li: renderMessage(node) });
    }
    if (!fresh.length) return 0;
    if (where === "start") {
      this.items = [...fresh, ...this.items];
      this.list.prepend(...fresh.map((f) => f.li));
    } else {
      // Live events may arrive out of order with a page: keep seq order.
      this.items.push(...fresh);
      this.items.sort((a, b) => a.seq - b.seq);
      fresh.sort((a, b) => a.seq - b.seq);
      for (const f of fresh) {
        const next = this.items.find((i) => i.seq > f.seq && i.li.parentNode === this.list);
        this.list.insertBefore(f.li, next ? next.li : null);
      }
    }
    return fresh.length;
  }

  trim(from) {
    while (this.items.length > MAX_RENDERED) {
      const item = from === "start" ? this.items.shift() : this.items.pop();
      item.li.remove();
      if (from === "start") this.hasBefore = true;
      else this.hasAfter = true;
    }
  }

  /** Live: messages appended to this conversation (from the event, without cursors). */
  appended(messages) {
    if (!messages || !messages.length) return;
    const maxSeq = Math.max(...messages.map((m) => m.seq));
    this.total = Math.max(this.total, maxSeq);
    this.onCount(this.total);
    if (this.hasAfter) {
      // The reader is looking at earlier messages: say there is more, do not move them.
      this.unseen += messages.length;
      this.update();
      return;
    }
    const follow = this.nearEnd;
    const added = this.add(messages, "end");
    this.trim("start");
    this.update();
    if (added) announce(`${added} new message${added === 1 ? "" : "s"}`);
    if (follow && this.items.length) {
      this.items[this.items.length - 1].li.scrollIntoView({ block: "end" });
    }
    // Fetch the cursors of what the event brought (and anything it did not), a moment later.
    clearTimeout(this.syncTimer);
    this.syncTimer = setTimeout(this.syncTail, 200);
  }

  async syncTail() {
    if (this.hasAfter || this.destroyed) return;
    if (this.loading) {
      this.syncTimer = setTimeout(this.syncTail, 200);
      return;
    }
    const last = this.lastCursored();
    await this.guard(async () => {
      const conv = last
        ? await this.fetch(MESSAGES_FIRST, { first: PAGE, after: last.cursor })
        : await this.fetch(MESSAGES_LAST, { last: PAGE });
      this.total = conv.messages.totalCount;
      this.onCount(conv.messageCount);
      this.add(conv.messages.edges, "end");
      this.trim("start");
      if (conv.messages.pageInfo.hasNextPage) this.syncTimer = setTimeout(this.syncTail, 0);
    });
  }

  /** The first read, or the transcript was replaced (`kept`: how many of its first messages
   * the replace left as they were, null when not known), or events may have been missed:
   * read the latest again (once the load in flight ended). A reader on an earlier window
   * stays there, told of later messages, unless a replace changed the window itself: it
   * then reads the latest too. Throws what the read throws: the caller shows it, and may
   * try again. */
  async refresh({ kept } = {}) {
    while (this.loading) await this.idle;
    const last = this.items.length ? this.items[this.items.length - 1].seq : 0;
    const windowKept = kept === undefined || (kept !== null && last <= kept);
    if (this.hasAfter && windowKept) {
      this.unseen = Math.max(this.unseen, 1);
      this.update();
      return;
    }
    await this.jump("latest", { focus: false, raise: true });
  }

  update() {
    const n = this.items.length;
    if (!n) {
      this.status.textContent = this.total ? "Loading…" : "No messages yet.";
    } else {
      const low = this.items[0].seq;
      const high = this.items[n - 1].seq;
      this.status.textContent = `Messages ${formatNumber(low)}–${formatNumber(high)} of ${formatNumber(
        Math.max(this.total, high),
      )}`;
    }
    this.earlier.hidden = !this.hasBefore;
    this.later.hidden = !this.hasAfter;
    this.firstButton.disabled = !this.hasBefore;
    this.latestButton.disabled = !this.hasAfter;
    this.newBelow.hidden = !(this.hasAfter && this.unseen > 0);
    this.newBelow.textContent = `${formatNumber(this.unseen)} new message${
      this.unseen === 1 ? "" : "s"
    } — show the latest`;
  }
}
