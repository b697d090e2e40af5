"""GraphiQL, served from vendored assets only.

The stock Strawberry page loads its scripts from a CDN and stays blank on a machine without
internet access.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path

from starlette.requests import HTTPConnection

__all__ = ["ASSETS_DIR", "ASSET_HEADERS", "asks_for_page", "graphiql_html", "page_headers"]

# Built by tools/build_graphiql.sh; pinned versions are listed in VERSIONS.txt there.
ASSETS_DIR = Path(__file__).parent / "assets"


def asks_for_page(request: HTTPConnection) -> bool:
    """A browser opening /graphql: GET or HEAD asking for HTML, with no query to run."""
    return (
        request.scope["type"] == "http"
        and request.scope["method"] in ("GET", "HEAD")
        and "text/html" in request.headers.get("accept", "")
        and "query" not in request.query_params
    )


DEFAULT_QUERY = """\
query {
  viewer {
    workspace {
      key
    }
    ownerType
    scopes
  }
}
"""
PLACEHOLDER = "<paste your token>"
DEFAULT_HEADERS = '{\n  "Authorization": "Bearer ' + PLACEHOLDER + '"\n}'
MISSING_TOKEN = (
    "No token yet: replace " + PLACEHOLDER + " in the Headers editor below with a token from "
    "`convograph token create` (the first `convograph serve` printed an ADMIN one)."
)

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>convograph GraphiQL</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{assets}/graphiql.min.css">
<link rel="stylesheet" href="{assets}/plugin-explorer.css">
<style>html, body, #graphiql {{ height: 100%; margin: 0; overflow: hidden; }}</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script src="{assets}/react.production.min.js"></script>
<script src="{assets}/react-dom.production.min.js"></script>
<script src="{assets}/graphiql.min.js"></script>
<script src="{assets}/plugin-explorer.umd.js"></script>
<script>
const config = {config};
const url = new URL(config.endpoint, window.location.href);
const subscriptionUrl = new URL(url);
subscriptionUrl.protocol = url.protocol === "https:" ? "wss:" : "ws:";
// createFetcher (@graphiql/toolkit) opens a graphql-transport-ws connection per subscription;
// its connection_init payload is the headers editor content: {{"Authorization": "Bearer …"}}.
const serverFetcher = GraphiQL.createFetcher({{
  url: url.href,
  subscriptionUrl: subscriptionUrl.href,
}});
// Until the placeholder is replaced there is no token to send: say so instead of a 401.
const fetcher = (params, options) => {{
  const headers = (options && options.headers) || {{}};
  const authorization = String(headers.Authorization || headers.authorization || "");
  if (authorization.includes(config.placeholder)) {{
    return Promise.resolve({{errors: [{{message: config.missingToken}}]}});
  }}
  return serverFetcher(params, options);
}};
// The schema (docs, completion, explorer) is fetched with the headers of the moment: fetch it
// again when they change, so pasting the token is enough.
function RefetchSchemaWhenHeadersChange() {{
  const schema = GraphiQL.React.useSchemaContext({{nonNull: true}});
  const [headers] = GraphiQL.React.useHeadersEditorState();
  const first = React.useRef(true);
  React.useEffect(() => {{
    if (first.current) {{
      first.current = false;
      return undefined;
    }}
    const timer = setTimeout(() => schema.introspect(), 400);
    return () => clearTimeout(timer);
  }}, [headers]);
  return null;
}}
// GraphiQL's history and tabs keep each query's headers in localStorage, the bearer token
// with them, for good and for any page of this origin to read: stored without them.
const WITHOUT_HEADERS = ["graphiql:queries", "graphiql:favorites", "graphiql:tabState"];
function withoutHeaders(key, value) {{
  if (!WITHOUT_HEADERS.includes(key) || typeof value !== "string") return value;
  try {{
    const stored = JSON.parse(value);
    for (const entry of [...(stored.queries || []), ...(stored.tabs || [])]) {{
      delete entry.headers;
    }}
    return JSON.stringify(stored);
  }} catch (_) {{
    return null;
  }}
}}
const storage = {{
  getItem: (key) => localStorage.getItem(key),
  setItem: (key, value) => {{
    const kept = withoutHeaders(key, value);
    if (kept === null) localStorage.removeItem(key);
    else localStorage.setItem(key, kept);
  }},
  removeItem: (key) => localStorage.removeItem(key),
  clear: () => localStorage.clear(),
  get length() {{ return localStorage.length; }},
}};
// What an older page stored with headers is rewritten without them.
for (const key of WITHOUT_HEADERS) {{
  const value = localStorage.getItem(key);
  if (value !== null) storage.setItem(key, value);
}}
ReactDOM.createRoot(document.getElementById("graphiql")).render(
  React.createElement(GraphiQL, {{
    fetcher,
    storage,
    defaultQuery: config.query,
    defaultHeaders: config.headers,
    defaultEditorToolsVisibility: "headers",
    plugins: [GraphiQLPluginExplorer.explorerPlugin()],
    toolbar: {{additionalContent: React.createElement(RefetchSchemaWhenHeadersChange)}},
  }}),
);
</script>
</body>
</html>
"""


# The page's one inline script is allowed by its hash (page_headers); GraphiQL and React set
# style attributes, and its fonts are data: URLs. 'self' covers the same host's WebSocket.
_CSP = (
    "default-src 'self'; script-src 'self' 'sha256-{digest}'; "
    "style-src 'self' 'unsafe-inline'; font-src 'self' data:; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
# The files of ASSETS_DIR, served beside the page.
ASSET_HEADERS = {"X-Content-Type-Options": "nosniff"}


def page_headers(page: str) -> dict[str, str]:
    """The headers `page` (graphiql_html's) is served with: a Content-Security-Policy that
    allows its inline script by hash and nothing from another host, no framing (a page that
    holds a token in its headers editor), no sniffing, no referrer."""
    script = page[page.rindex("<script>") + len("<script>") : page.rindex("</script>")]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return {
        "Content-Security-Policy": _CSP.format(digest=digest),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        **ASSET_HEADERS,
    }


def graphiql_html(*, endpoint: str = "/graphql", assets_url: str = "/graphiql-assets") -> str:
    """Return the GraphiQL page for `endpoint`, loading its scripts and styles from `assets_url`.

    `endpoint` serves GraphQL over HTTP POST and, with the `graphql-transport-ws` protocol,
    over a WebSocket at the same path (ws:// or wss:// follows the page's scheme). `assets_url`
    is where `ASSETS_DIR` is served, e.g. by `starlette.staticfiles.StaticFiles`.
    """
    config = json.dumps(
        {
            "endpoint": endpoint,
            "query": DEFAULT_QUERY,
            "headers": DEFAULT_HEADERS,
            "placeholder": PLACEHOLDER,
            "missingToken": MISSING_TOKEN,
        }
    )
    # "</" inside a JSON string could close the <script> element early.
    config = config.replace("</", "<\\/")
    assets = html.escape(assets_url.rstrip("/"), quote=True)
    return _PAGE.format(assets=assets, config=config)
