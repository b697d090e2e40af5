// The conversation list: newest first, filters (agent slug, context, root only, full-text
// search, and the owner type for ADMIN/SERVICE tokens), keyset pages of PAGE rows.

import { debounce, formatNumber, h, timeEl } from "./dom.js";
import { AuthError, GraphQLError, describeError, isTransient, retryDelayMs } from "./gql.js";
import { CONVERSATIONS } from "./queries.js";

const PAGE = 50;
const OWNER_TYPES = ["USER", "AUDIENCE", "RUNTIME", "TOKEN", "SYSTEM"];

export class ConversationList {
  /** canFilterOwner: the token may read the whole workspace (ADMIN or SERVICE). */
  constructor({ request, canFilterOwner, onAuthError }) {
    this.request = request;
    this.onAuthError = onAuthError;
    this.rows = new Map(); // id -> {data, li}
    this.endCursor = null;
    this.hasNext = false;
    this.selected = null;
    this.generation = 0;
    // A read that failed for a passing reason (the server out of reach, restarting) is tried
    // again, the rows read before kept meanwhile.
    this.failures = 0;
    this.retryTimer = null;

    const field = (label, input) => h("label", { class: "field" }, h("span", {}, label), input);
    this.search = h("input", { type: "search", name: "search", autocomplete: "off", spellcheck: "false" });
    this.agentSlug = h("input", { type: "text", name: "agentSlug", autocomplete: "off", spellcheck: "false" });
    this.context = h("input", { type: "text", name: "context", autocomplete: "off", spellcheck: "false" });
    this.rootOnly = h("input", { type: "checkbox", name: "rootOnly" });
    this.ownerType = canFilterOwner
      ? h(
          "select",
          { name: "ownerType" },
          h("option", { value: "" }, "Any owner"),
          OWNER_TYPES.map((t) => h("option", { value: t }, t.toLowerCase())),
        )
      : null;
    this.form = h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter conversations" },
      field("Search messages", this.search),
      h("div", { class: "filter-row" }, field("Agent slug", this.agentSlug), field("Context", this.context)),
      h(
        "div",
        { class: "filter-row" },
        h("label", { class: "check" }, this.rootOnly, " Root conversations only"),
        this.ownerType ? field("Owner type", this.ownerType) : null,
      ),
      h("div", { class: "filter-actions" },
        h("button", { type: "submit" }, "Apply"),
        h("button", { type: "button", class: "quiet", "data-action": "refresh" }, "Refresh")),
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.load();
    });
    this.form.querySelector("[data-action=refresh]").addEventListener("click", () => this.load());
    const later = debounce(() => this.load(), 350);
    for (const input of [this.search, this.agentSlug, this.context]) {
      input.addEventListener("input", later);
    }
    this.rootOnly.addEventListener("change", () => this.load());
    if (this.ownerType) this.ownerType.addEventListener("change", () => this.load());

    this.status = h("p", { class: "list-status", "aria-live": "polite" });
    this.error = h("p", { class: "error", role: "alert", hidden: true });
    this.list = h("ul", { class: "conv-list", "aria-label": "Conversations" });
    this.list.addEventListener("keydown", (event) => {
      // Links open on Enter natively; Space too, as list rows do elsewhere.
      if (event.key === " " && event.target.classList.contains("conv-row")) {
        event.preventDefault();
        event.target.click();
      }
    });
    this.more = h("button", { type: "button", class: "quiet load-more", hidden: true }, "Load more");
    this.more.addEventListener("click", () => this.loadMore());
    this.el = h(
      "section",
      { class: "list-pane", "aria-labelledby": "list-title" },
      h("h2", { id: "list-title", class: "pane-title", tabindex: "-1" }, "Conversations"),
      this.form,
      this.status,
      this.error,
      this.list,
      this.more,
    );
  }

  filter() {
    const f = {};
    const text = (input) => input.value.trim();
    if (text(this.agentSlug)) f.agentSlug = text(this.agentSlug);
    if (text(this.context)) f.context = text(this.context);
    if (text(this.search)) f.search = text(this.search);
    if (this.rootOnly.checked) f.rootOnly = true;
    // Sent only when picked: a server without the filter refuses it, and says so.
    if (this.ownerType && this.ownerType.value) f.ownerType = this.ownerType.value;
    return f;
  }

  async load() {
    const generation = ++this.generation;
    clearTimeout(this.retryTimer);
    this.el.setAttribute("aria-busy", "true");
    try {
      const data = await this.request(CONVERSATIONS, { filter: this.filter(), first: PAGE });
      if (generation !== this.generation) return;
      // A reload (Refresh, a filter, the search's debounced one) renders every row anew:
      // the keyboard's focus stays on the conversation it was on, or on the list's title
      // when that one left the list, rather than falling back to the page's start.
      const focused = this.list.contains(document.activeElement) ? document.activeElement : null;
      this.rows.clear();
      this.list.replaceChildren();
      this.add(data.conversations);
      this.failures = 0;
      this.showError(null);
      if (focused && !this.focusRow(focused.closest(".conv-row")?.dataset.id)) this.focusTitle();
    } catch (err) {
      if (generation !== this.generation || this.destroyed) return;
      if (err instanceof AuthError) {
        this.onAuthError(err);
        return;
      }
      if (isTransient(err)) {
        // The rows read before stay (they were right a moment ago); the read is tried again.
        const wait = retryDelayMs(err, this.failures++);
        this.retryTimer = setTimeout(() => {
          if (generation === this.generation && !this.destroyed) this.load();
        }, wait);
        this.showError(err, wait);
        return;
      }
      this.rows.clear();
      this.list.replaceChildren();
      this.hasNext = false;
      this.status.textContent = "";
      this.showError(err);
    } finally {
      if (generation === this.generation) {
        this.el.removeAttribute("aria-busy");
        this.more.hidden = !this.hasNext;
      }
    }
  }

  async loadMore() {
    const generation = this.generation;
    this.more.disabled = true;
    try {
      const data = await this.request(CONVERSATIONS, {
        filter: this.filter(),
        first: PAGE,
        after: this.endCursor,
      });
      if (generation !== this.generation) return;
      const firstNew = this.add(data.conversations);
      if (firstNew) firstNew.querySelector("a").focus();
    } catch (err) {
      if (err instanceof AuthError) this.onAuthError(err);
      else this.showError(err);
    } finally {
      this.more.disabled = false;
      this.more.hidden = !this.hasNext;
    }
  }

  /** Show `err` (none: hide the error); `retryMs`: when the read is tried again. */
  showError(err, retryMs = null) {
    this.error.hidden = !err;
    let text = err ? describeError(err) : "";
    if (err instanceof GraphQLError && this.ownerType && this.ownerType.value) {
      text = `The server refused the filter (owner type ${this.ownerType.value.toLowerCase()}): ${text}`;
    }
    if (err && retryMs !== null) {
      text = `Could not read the list again (trying again in ${Math.max(1, Math.round(retryMs / 1000))} s): ${text}`;
    }
    this.error.textContent = text;
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.retryTimer);
  }

  add(connection) {
    this.endCursor = connection.pageInfo.endCursor;
    this.hasNext = connection.pageInfo.hasNextPage;
    let first = null;
    for (const c of connection.nodes) {
      if (this.rows.has(c.id)) continue;
      const li = this.row(c);
      this.rows.set(c.id, { data: c, li });
      this.list.append(li);
      first = first || li;
    }
    const shown = this.rows.size;
    const total = connection.totalCount;
    this.status.textContent = total
      ? `${formatNumber(shown)} of ${formatNumber(total)} conversation${total === 1 ? "" : "s"}`
      : "No conversations match.";
    return first;
  }

  row(c) {
    const meta = [
      c.agentSlug ? h("span", { class: "agent" }, c.agentSlug) : h("span", { class: "muted" }, "no agent"),
      h("span", { class: "context" }, c.context),
      h("span", {}, `${formatNumber(c.messageCount)} message${c.messageCount === 1 ? "" : "s"}`),
      h("span", {}, "updated ", timeEl(c.updatedAt)),
    ];
    const link = h(
      "a",
      {
        class: "conv-row",
        href: `#/c/${encodeURIComponent(c.id)}`,
        "aria-current": this.selected === c.id ? "page" : null,
        dataset: { id: c.id },
      },
      h(
        "span",
        { class: "conv-title" },
        c.title || "Untitled",
        c.parentDelegation ? h("span", { class: "badge" }, "delegated") : null,
      ),
      h("span", { class: "conv-meta" }, meta),
    );
    return h("li", {}, link);
  }

  focusTitle() {
    this.el.querySelector("h2").focus();
  }

  /** Focus conversation `id`'s row; false when the list does not hold it. */
  focusRow(id) {
    const row = this.rows.get(id);
    if (row) row.li.firstElementChild.focus();
    return Boolean(row);
  }

  select(id) {
    this.selected = id;
    for (const [rowId, row] of this.rows) {
      const a = row.li.firstElementChild;
      if (rowId === id) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  }

  /** Live: a conversation of the list was deleted: its row goes (its link would lead to
   * "not found"). */
  remove(id) {
    const row = this.rows.get(id);
    if (!row) return;
    const hadFocus = row.li.contains(document.activeElement);
    row.li.remove();
    this.rows.delete(id);
    if (hadFocus) this.focusTitle();
  }

  /** Live: a conversation of the list changed (its title, message count, update time). */
  touch(id, changes) {
    const row = this.rows.get(id);
    if (!row) return;
    row.data = { ...row.data, ...changes };
    const fresh = this.row(row.data);
    const hadFocus = row.li.contains(document.activeElement);
    row.li.replaceWith(fresh);
    row.li = fresh;
    if (hadFocus) fresh.firstElementChild.focus();
  }
}
