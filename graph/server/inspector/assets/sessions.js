// Sessions: a session's checkpoint history (version, Reflect outcome, time) and a structural
// diff between any two versions of its state document. There is no query that lists sessions:
// the reader enters the id a runtime checkpoints under.

import { fill, formatNumber, h, timeEl, uid } from "./dom.js";
import { AuthError, describeError } from "./gql.js";
import { compact, diffJSON, formatPath, toJSONText } from "./json.js";
import { SESSION_HISTORY } from "./queries.js";

const OP_TEXT = { added: "Added", removed: "Removed", changed: "Changed" };
const DIFF_RENDER_LIMIT = 500;

export class SessionsView {
  constructor({ app, sessionId }) {
    this.app = app;
    this.sessionId = sessionId || "";
    this.versions = []; // newest first
    this.endCursor = null;
    this.hasNext = false;

    const inputId = uid("session-id");
    this.input = h("input", {
      id: inputId,
      type: "text",
      name: "sessionId",
      autocomplete: "off",
      spellcheck: "false",
      required: true,
      value: this.sessionId,
    });
    this.form = h(
      "form",
      { class: "session-form" },
      h("label", { for: inputId }, "Session id"),
      h("div", { class: "row" }, this.input, h("button", { type: "submit" }, "Show history")),
      h("p", { class: "hint" }, "There is no list of sessions: enter the id a runtime checkpoints under (its state's session_id)."),
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const id = this.input.value.trim();
      if (!id) return;
      const hash = `#/sessions/${encodeURIComponent(id)}`;
      if (window.location.hash !== hash) window.location.hash = hash;
      else this.load(id);
    });
    this.error = h("p", { class: "error", role: "alert", hidden: true });
    this.result = h("div", { class: "session-result" });
    this.el = h(
      "section",
      { class: "detail-pane sessions", "aria-labelledby": "sessions-title" },
      h("h2", { id: "sessions-title", tabindex: "-1" }, "Sessions"),
      this.form,
      this.error,
      this.result,
    );
  }

  focusTitle() {
    this.el.querySelector("h2").focus();
  }

  async load(sessionId) {
    this.sessionId = sessionId;
    this.input.value = sessionId;
    this.versions = [];
    fill(this.result, h("p", { class: "muted" }, "Loading…"));
    await this.fetchPage(null);
  }

  async fetchPage(after) {
    try {
      const data = await this.app.request(SESSION_HISTORY, { sessionId: this.sessionId, after });
      const conn = data.sessionStateHistory;
      this.versions.push(...conn.nodes);
      this.total = conn.totalCount;
      this.endCursor = conn.pageInfo.endCursor;
      this.hasNext = conn.pageInfo.hasNextPage;
      this.error.hidden = true;
      this.render();
    } catch (err) {
      if (err instanceof AuthError) {
        this.app.onAuthError(err);
        return;
      }
      this.error.hidden = false;
      this.error.textContent = describeError(err);
      this.result.replaceChildren();
    }
  }

  render() {
    if (!this.versions.length) {
      fill(this.result, h("p", { class: "muted" }, "No checkpoints for this session (yet)."));
      return;
    }
    const history = h("ol", { class: "versions", "aria-label": "Checkpoint versions, newest first" });
    for (const v of this.versions) {
      history.append(
        h(
          "li",
          { class: "version" },
          h("span", { class: "version-no" }, `Version ${v.version}`),
          h("span", { class: `outcome outcome-${String(v.outcome).toLowerCase()}` }, v.outcome),
          h("span", {}, "checkpointed ", timeEl(v.createdAt)),
          v.payloadType ? h("span", { class: "muted" }, v.payloadType) : null,
        ),
      );
    }
    const more = this.hasNext
      ? h("button", { type: "button", class: "quiet" }, "Load older versions")
      : null;
    if (more) more.addEventListener("click", () => this.fetchPage(this.endCursor));

    const option = (v) => h("option", { value: String(v.version) }, `Version ${v.version} (${v.outcome})`);
    const fromId = uid("from");
    const toId = uid("to");
    this.from = h("select", { id: fromId }, this.versions.map(option));
    this.to = h("select", { id: toId }, this.versions.map(option));
    this.to.value = String(this.versions[0].version);
    this.from.value = String((this.versions[1] || this.versions[0]).version);
    this.from.addEventListener("change", () => this.renderDiff());
    this.to.addEventListener("change", () => this.renderDiff());
    this.diffEl = h("div", { class: "diff", "aria-live": "polite" });

    fill(this.result,
      h("h3", {}, `History of ${this.sessionId}`, h("span", { class: "muted" }, ` — ${formatNumber(this.total)} version${this.total === 1 ? "" : "s"}`)),
      history,
      more,
      h(
        "section",
        { class: "diff-section", "aria-labelledby": "diff-title" },
        h("h3", { id: "diff-title" }, "Compare two versions"),
        h(
          "div",
          { class: "diff-pick" },
          h("label", { for: fromId }, "From"),
          this.from,
          h("label", { for: toId }, "To"),
          this.to,
        ),
        this.diffEl,
      ),
    );
    this.renderDiff();
  }

  renderDiff() {
    const find = (n) => this.versions.find((v) => String(v.version) === n);
    const a = find(this.from.value);
    const b = find(this.to.value);
    if (!a || !b) return;
    const changes = diffJSON(a.state, b.state);
    const counts = { added: 0, removed: 0, changed: 0 };
    for (const c of changes) counts[c.op] += 1;
    const summary = changes.length
      ? `From version ${a.version} to version ${b.version}: ${counts.changed} changed, ${counts.added} added, ${counts.removed} removed.`
      : `Versions ${a.version} and ${b.version} hold the same document.`;
    const list = h("ul", { class: "changes", "aria-label": "Changes" });
    for (const c of changes.slice(0, DIFF_RENDER_LIMIT)) {
      const values = [];
      if (c.op !== "added") values.push(h("code", { class: "before" }, compact(c.before)));
      if (c.op === "changed") values.push(h("span", { class: "arrow", "aria-label": "becomes" }, " → "));
      if (c.op !== "removed") values.push(h("code", { class: "after" }, compact(c.after)));
      list.append(
        h(
          "li",
          { class: `change change-${c.op}` },
          h("span", { class: "op" }, OP_TEXT[c.op]),
          h("code", { class: "path" }, formatPath(c.path)),
          h("span", { class: "values" }, values),
        ),
      );
    }
    const documents = h(
      "details",
      { class: "json-details" },
      h("summary", {}, "Both documents"),
      h(
        "div",
        { class: "two-docs" },
        h("div", {}, h("h4", {}, `Version ${a.version}`), h("pre", { class: "json", tabindex: "0" }, toJSONText(a.state))),
        h("div", {}, h("h4", {}, `Version ${b.version}`), h("pre", { class: "json", tabindex: "0" }, toJSONText(b.state))),
      ),
    );
    fill(this.diffEl,
      h("p", { class: "diff-summary" }, summary),
      changes.length ? list : null,
      changes.length > DIFF_RENDER_LIMIT
        ? h("p", { class: "muted" }, `The first ${DIFF_RENDER_LIMIT} of ${formatNumber(changes.length)} changes.`)
        : null,
      documents,
    );
  }
}
