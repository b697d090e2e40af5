// The delegation tree of a conversation, drawn as nested lists. Each node: its tiers
// (delegating → target), task, status (colour and text), summary, duration, message count of
// its child transcript, and the delegation it resumed. Two levels come with each request
// (the server refuses documents deeper than 12); a node whose children are not loaded yet
// loads them when it is expanded.
//
// Keyboard: Tab reaches the nodes; Up/Down move between visible nodes, Right expands (or goes
// to the first child), Left collapses (or goes to the parent), Home/End; Enter or Space opens
// the node's child transcript.

import { durationBetween, fill, formatDuration, formatNumber, h, shorten, timeEl, uid } from "./dom.js";
import { AuthError, showErrorIn } from "./gql.js";
import { TREE } from "./queries.js";

export const STATUS_TEXT = {
  PENDING: "Pending",
  RUNNING: "Running",
  COMPLETED: "Completed",
  FAILED: "Failed",
};
const EXPAND_ALL_LIMIT = 500;

export function statusBadge(status) {
  const s = String(status || "").toUpperCase();
  return h(
    "span",
    { class: `status status-${s.toLowerCase()}` },
    h("span", { class: "dot", "aria-hidden": "true" }),
    STATUS_TEXT[s] || s,
  );
}

export class DelegationTree {
  /**
   * root: {id, title, messageCount} of the conversation whose delegations are drawn.
   * onOpen(node): show node's child transcript (node.d is the delegation, node.childId its
   * child conversation). onAuthError(err): the token stopped working.
   */
  constructor({ request, root, onOpen, onAuthError }) {
    this.request = request;
    this.onOpen = onOpen;
    this.onAuthError = onAuthError || (() => {});
    this.nodes = new Map(); // delegation id -> node
    this.byChild = new Map(); // conversation id -> node (the root too)
    this.current = null;
    this.root = {
      isRoot: true,
      id: null,
      childId: root.id,
      title: root.title,
      messageCount: root.messageCount,
      children: [],
      loaded: false,
      childCount: 0,
      endCursor: null,
      hasMore: false,
      expanded: true,
      depth: 0,
    };
    this.byChild.set(root.id, this.root);
    this.summary = h("p", { class: "tree-summary", "aria-live": "polite" });
    this.expandAllButton = h("button", { type: "button", class: "quiet small" }, "Expand all");
    this.expandAllButton.addEventListener("click", () => this.expandAll());
    this.error = h("p", { class: "error", role: "alert", hidden: true });
    this.list = h("ul", { class: "tree", "aria-label": "Delegation tree" });
    this.el = h(
      "section",
      { class: "tree-view", "aria-label": "Delegations" },
      h("div", { class: "tree-bar" }, this.summary, this.expandAllButton),
      this.error,
      this.list,
    );
    this.list.addEventListener("keydown", (event) => this.onKey(event));
    this.ticker = setInterval(() => this.tick(), 10_000);
  }

  destroy() {
    clearInterval(this.ticker);
  }

  /** Load the first two levels; with `raise`, a failure is thrown (for the caller to show and
   * try again) rather than shown. */
  async load({ raise = false } = {}) {
    await this.loadChildren(this.root, { raise });
    this.render();
  }

  showError(err, prefix = "") {
    showErrorIn(this.error, err, prefix);
  }

  /** Load (or load more of) `node`'s children, with their own children: two levels. A
   * failure is shown, or with `raise` thrown. */
  async loadChildren(node, { more = false, raise = false } = {}) {
    if (node.loading) return;
    node.loading = true;
    try {
      const data = await this.request(TREE, { id: node.childId, after: more ? node.endCursor : null });
      const conv = data.conversation;
      if (!conv) throw new Error("This conversation no longer exists.");
      if (node.isRoot) {
        node.title = conv.title;
        node.messageCount = conv.messageCount;
      }
      this.absorb(node, conv.delegations, node.depth);
      this.showError(null);
    } catch (err) {
      if (raise) throw err;
      if (err instanceof AuthError) this.onAuthError(err);
      this.showError(err);
    } finally {
      node.loading = false;
    }
  }

  /** Add a connection's delegations under `parent` (recursing into nested connections). */
  absorb(parent, connection, depth) {
    parent.loaded = true;
    parent.childCount = connection.totalCount;
    parent.endCursor = connection.pageInfo ? connection.pageInfo.endCursor : null;
    parent.hasMore = connection.pageInfo ? connection.pageInfo.hasNextPage : false;
    for (const d of connection.nodes || []) {
      const node = this.upsert(d, parent, depth + 1);
      const nested = d.childConversation && d.childConversation.delegations;
      if (nested && nested.nodes) this.absorb(node, nested, depth + 1);
      else if (nested) node.childCount = Math.max(node.childCount, nested.totalCount);
    }
  }

  upsert(d, parent, depth) {
    let node = this.nodes.get(d.id);
    if (!node) {
      node = {
        isRoot: false,
        id: d.id,
        d,
        childId: d.childConversation.id,
        messageCount: d.childConversation.messageCount,
        parent,
        children: [],
        loaded: false,
        childCount: 0,
        endCursor: null,
        hasMore: false,
        expanded: true,
        depth,
        li: null,
      };
      this.nodes.set(d.id, node);
      this.byChild.set(node.childId, node);
      parent.children.push(node);
    } else {
      node.d = { ...node.d, ...d };
      if (d.childConversation && typeof d.childConversation.messageCount === "number") {
        node.messageCount = d.childConversation.messageCount;
      }
    }
    return node;
  }

  // -- live ----------------------------------------------------------------------

  delegationCreated(d) {
    const parentId = d.parentConversation && d.parentConversation.id;
    const parent = parentId ? this.byChild.get(parentId) : null;
    if (!parent) return false;
    if (this.nodes.has(d.id)) {
      this.delegationUpdated(d);
      return true;
    }
    if (!parent.loaded) {
      parent.childCount += 1;
      this.rerender(parent);
      return true;
    }
    const node = this.upsert(d, parent, parent.depth + 1);
    node.loaded = true; // a new delegation has no children yet
    parent.childCount = Math.max(parent.childCount, parent.children.length);
    this.rerender(parent);
    this.updateSummary();
    return true;
  }

  delegationUpdated(d) {
    const node = this.nodes.get(d.id);
    if (!node) return false;
    this.upsert(d, node.parent, node.depth);
    this.rerender(node);
    this.updateSummary();
    return true;
  }

  messagesAppended(conversationId, count) {
    const node = this.byChild.get(conversationId);
    if (!node || typeof count !== "number") return;
    if (count === node.messageCount) return;
    node.messageCount = Math.max(node.messageCount || 0, count);
    this.rerender(node);
  }

  /** The node whose child transcript is shown (aria-current), or null. */
  setCurrent(node) {
    const before = this.current;
    this.current = node;
    if (before && before.li) this.rerender(before);
    if (node && node.li) this.rerender(node);
  }

  // -- drawing -------------------------------------------------------------------

  render() {
    fill(this.list, this.renderNode(this.root));
    this.updateSummary();
  }

  updateSummary() {
    const counts = {};
    for (const node of this.nodes.values()) counts[node.d.status] = (counts[node.d.status] || 0) + 1;
    const parts = Object.keys(STATUS_TEXT)
      .filter((s) => counts[s])
      .map((s) => `${counts[s]} ${STATUS_TEXT[s].toLowerCase()}`);
    const n = this.nodes.size;
    this.summary.textContent = n
      ? `${formatNumber(n)} delegation${n === 1 ? "" : "s"} shown: ${parts.join(", ")}`
      : "No delegations from this conversation.";
    this.expandAllButton.hidden = ![...this.allNodes()].some((x) => !x.loaded && x.childCount > 0);
  }

  *allNodes() {
    yield this.root;
    yield* this.nodes.values();
  }

  /** Draw `node` (and what is below it) again, keeping the keyboard focus where it was. */
  rerender(node) {
    const old = node.li;
    if (!old || !old.isConnected) return;
    const active = document.activeElement;
    const key = active && old.contains(active) ? active.dataset.focusKey : null;
    const fresh = this.renderNode(node); // (sets node.li to the new element)
    old.replaceWith(fresh);
    if (key) {
      const again = fresh.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
      if (again) again.focus();
    }
  }

  renderNode(node) {
    const li = h("li", { class: `tnode${node.isRoot ? " tnode-root" : ""}`, dataset: { depth: node.depth } });
    node.li = li;
    const childrenId = uid("kids");
    const hasChildren = node.childCount > 0 || node.children.length > 0;
    let toggle;
    if (hasChildren && !node.isRoot) {
      const count = Math.max(node.childCount, node.children.length);
      const label = `${node.expanded && node.loaded ? "Hide" : "Show"} ${count} sub-delegation${count === 1 ? "" : "s"}`;
      toggle = h(
        "button",
        {
          type: "button",
          class: "tnode-toggle",
          "aria-expanded": String(node.expanded && node.loaded),
          "aria-controls": childrenId,
          "aria-label": label,
          title: label,
          dataset: { focusKey: `${node.id}:toggle` },
        },
        h("span", { "aria-hidden": "true" }, node.expanded && node.loaded ? "▾" : "▸"),
      );
      toggle.addEventListener("click", () => this.toggle(node));
    } else {
      toggle = h("span", { class: "tnode-toggle-space", "aria-hidden": "true" });
    }
    li.append(node.isRoot ? this.rootCard(node, toggle) : this.card(node, toggle));
    if (hasChildren && (node.isRoot || (node.expanded && node.loaded))) {
      const ul = h("ul", { class: "tchildren", id: childrenId });
      for (const child of node.children) ul.append(this.renderNode(child));
      if (node.hasMore) {
        const more = h("button", { type: "button", class: "quiet small" }, "Load more delegations");
        more.addEventListener("click", async () => {
          more.disabled = true;
          await this.loadChildren(node, { more: true });
          this.rerender(node);
          this.updateSummary();
        });
        ul.append(h("li", { class: "tnode-more" }, more));
      }
      li.append(ul);
    }
    return li;
  }

  rootCard(node, toggle) {
    const open = h(
      "button",
      {
        type: "button",
        class: "tnode-open",
        "aria-current": this.current === node ? "true" : null,
        dataset: { focusKey: "root:open" },
      },
      h("span", { class: "tiers" }, "This conversation"),
      h("span", { class: "task" }, node.title || "Untitled"),
    );
    open.addEventListener("click", () => this.onOpen(node));
    open.__node = node;
    return h(
      "div",
      { class: "tcard tcard-root" },
      h("div", { class: "tcard-head" }, toggle, open),
      h("p", { class: "tmeta" }, `${formatNumber(node.messageCount)} messages`),
    );
  }

  card(node, toggle) {
    const d = node.d;
    const metaId = uid("meta");
    const open = h(
      "button",
      {
        type: "button",
        class: "tnode-open",
        "aria-describedby": metaId,
        "aria-current": this.current === node ? "true" : null,
        dataset: { delegationId: d.id, focusKey: `${d.id}:open` },
      },
      h("span", { class: "tiers" }, `${d.delegatingTier} → ${d.targetTier}`),
      h("span", { class: "task" }, d.task),
    );
    open.addEventListener("click", () => this.onOpen(node));
    open.__node = node;
    const duration = durationBetween(d.createdAt, d.completedAt);
    const durationText =
      d.completedAt || d.status === "COMPLETED" || d.status === "FAILED"
        ? formatDuration(duration)
        : `running for ${formatDuration(duration)}`;
    const meta = h(
      "p",
      { class: "tmeta", id: metaId },
      statusBadge(d.status),
      h("span", { class: "duration", dataset: d.completedAt ? {} : { since: d.createdAt } }, durationText),
      h("span", {}, `${formatNumber(node.messageCount)} message${node.messageCount === 1 ? "" : "s"}`),
      h("span", {}, "started ", timeEl(d.createdAt)),
      d.maxTurns ? h("span", {}, `max ${d.maxTurns} turns`) : null,
    );
    const card = h(
      "div",
      { class: `tcard tcard-${String(d.status).toLowerCase()}` },
      h("div", { class: "tcard-head" }, toggle, open),
      meta,
    );
    if (d.summary) card.append(h("p", { class: "summary" }, h("span", { class: "label" }, "Summary "), d.summary));
    if (d.resumedFrom) {
      const from = d.resumedFrom;
      const jump = h(
        "button",
        { type: "button", class: "linkish", dataset: { focusKey: `${d.id}:resumed` } },
        `${from.targetTier}: ${shorten(from.task, 60)} (${STATUS_TEXT[from.status] || from.status})`,
      );
      jump.addEventListener("click", () => this.focusDelegation(from.id));
      card.append(h("p", { class: "resumed" }, "Resumed from ", jump));
    }
    return card;
  }

  tick() {
    for (const el of this.list.querySelectorAll(".duration[data-since]")) {
      el.textContent = `running for ${formatDuration(durationBetween(el.dataset.since, null))}`;
    }
  }

  focusDelegation(id) {
    const node = this.nodes.get(id);
    if (!node || !node.li) return;
    // Unfold its ancestors so that it is visible.
    for (let p = node.parent; p && !p.isRoot; p = p.parent) p.expanded = true;
    this.render();
    const button = node.li.querySelector(".tnode-open");
    button.focus();
    button.scrollIntoView({ block: "center" });
    node.li.classList.add("flash");
    setTimeout(() => node.li && node.li.classList.remove("flash"), 1600);
  }

  async toggle(node, { expand } = {}) {
    const want = expand ?? !(node.expanded && node.loaded);
    if (want && !node.loaded) {
      node.expanded = true;
      await this.loadChildren(node);
    } else {
      node.expanded = want;
    }
    this.rerender(node);
    this.updateSummary();
  }

  async expandAll() {
    this.expandAllButton.disabled = true;
    try {
      for (;;) {
        const pending = [...this.allNodes()].filter((n) => !n.loaded && n.childCount > 0);
        if (!pending.length || this.nodes.size >= EXPAND_ALL_LIMIT) break;
        for (const n of pending) n.expanded = true;
        await Promise.all(pending.slice(0, 8).map((n) => this.loadChildren(n)));
        if (!this.error.hidden) break;
      }
      for (const n of this.nodes.values()) n.expanded = true;
      this.render();
    } finally {
      this.expandAllButton.disabled = false;
    }
  }

  onKey(event) {
    const target = event.target;
    if (!target.classList || !target.classList.contains("tnode-open")) return;
    const buttons = [...this.list.querySelectorAll(".tnode-open")];
    const i = buttons.indexOf(target);
    const node = target.__node;
    const go = (b) => {
      if (b) {
        event.preventDefault();
        b.focus();
      }
    };
    switch (event.key) {
      case "ArrowDown":
        go(buttons[i + 1]);
        break;
      case "ArrowUp":
        go(buttons[i - 1]);
        break;
      case "Home":
        go(buttons[0]);
        break;
      case "End":
        go(buttons[buttons.length - 1]);
        break;
      case "ArrowRight":
        event.preventDefault();
        if (node && !node.isRoot && (node.childCount > 0 || node.children.length) && !(node.expanded && node.loaded)) {
          this.toggle(node, { expand: true });
        } else if (node && node.children.length && node.children[0].li) {
          go(node.children[0].li.querySelector(".tnode-open"));
        }
        break;
      case "ArrowLeft":
        event.preventDefault();
        if (node && !node.isRoot && node.expanded && node.loaded && node.children.length) {
          this.toggle(node, { expand: false });
        } else if (node && node.parent && node.parent.li) {
          go(node.parent.li.querySelector(".tnode-open"));
        }
        break;
      default:
        break;
    }
  }
}
