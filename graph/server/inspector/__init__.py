"""The inspector: a web page at /ui where people watch conversations, delegation trees and
session checkpoints live.

Hand-written ES modules, CSS and HTML shipped as package data: no JavaScript toolchain, no
build step, nothing fetched from another host. The page is `inspector_html()`; the files in
`ASSETS_DIR` are served beside it (e.g. `Mount("/ui/assets", StaticFiles(directory=ASSETS_DIR))`).

The page works under `Content-Security-Policy: default-src 'self'; img-src 'self' data:;
frame-ancestors 'none'` (`CSP` below): it has no inline script or style. Its settings
travel in a `<script type="application/json" id="config">` element, which is data, not code.
It talks to the GraphQL endpoint only (POST over HTTP, `graphql-transport-ws` over a
WebSocket at the same path), with the token a person types in; the token stays in the tab's
`sessionStorage`.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

__all__ = ["ASSETS_DIR", "CSP", "inspector_html"]

ASSETS_DIR = Path(__file__).parent / "assets"

# What the page needs and nothing more; the app sends it with the page.
# ('self' covers the same host's WebSocket: `ws:` would let the page reach any host.)
CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>convograph inspector</title>
<link rel="icon" href="{assets}/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="{assets}/inspector.css">
<script type="application/json" id="config">{config}</script>
<script type="module" src="{assets}/app.js"></script>
</head>
<body>
<a class="skip-link" href="#main" data-skip>Skip to content</a>
<header class="topbar">
  <p class="brand">
    <span class="brand-name">convograph</span> <span class="brand-sub">inspector</span>
  </p>
  <nav class="views" aria-label="Views" id="views" hidden>
    <a href="#/" data-view="conversations">Conversations</a>
    <a href="#/sessions" data-view="sessions">Sessions</a>
  </nav>
  <p class="whoami" id="whoami" hidden></p>
  <p class="live" id="live" role="status" hidden></p>
  <button type="button" class="quiet" id="sign-out" hidden>Sign out</button>
</header>
<section class="figures" id="figures" aria-label="Workspace figures" hidden></section>
<main id="main" tabindex="-1">
  <p class="boot" id="boot">Loading the inspector…</p>
  <noscript><p class="boot">The inspector needs JavaScript.</p></noscript>
  <section class="signin" id="signin" aria-labelledby="signin-title" hidden>
    <h1 id="signin-title">Sign in</h1>
    <p class="hint">Paste a convograph token (<code>convograph token create</code> makes one).
    It is kept in this tab only, and sent as a bearer token to this server.</p>
    <form id="signin-form" novalidate>
      <label for="token">Token</label>
      <div class="row">
        <input id="token" name="token" type="password" autocomplete="off" autocapitalize="off"
               spellcheck="false" required aria-describedby="signin-error">
        <button type="submit">Sign in</button>
      </div>
      <p class="error" id="signin-error" role="alert"></p>
    </form>
  </section>
  <div class="app" id="app" hidden></div>
</main>
<div class="sr-only" id="announcer" aria-live="polite"></div>
</body>
</html>
"""


def inspector_html(*, assets_url: str = "/ui/assets", endpoint: str = "/graphql") -> str:
    """The inspector page, loading its modules and styles from `assets_url`.

    `endpoint` is the GraphQL endpoint (HTTP POST, and `graphql-transport-ws` over a
    WebSocket at the same path; ws:// or wss:// follows the page's scheme), relative to the
    page or absolute on the same origin. `assets_url` is where `ASSETS_DIR` is served.
    """
    config = json.dumps({"endpoint": endpoint})
    # "</" inside the JSON could close the <script> element early; "<!--" could open a comment.
    config = config.replace("<", "\\u003c")
    assets = html.escape(assets_url.rstrip("/"), quote=True)
    return _PAGE.format(assets=assets, config=config)
