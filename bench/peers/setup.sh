#!/usr/bin/env bash
# Create bench/.venv-peers (python3.11) holding the peer libraries, isolated from the
# project's own environment so their pins can never leak into convograph's.
# Idempotent: re-running only installs what the requirements file changed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$(dirname "$here")"
venv="$bench/.venv-peers"
reqs="$bench/requirements-peers.txt"
stamp="$venv/.requirements.sha256"

if [[ ! -x "$venv/bin/python" ]]; then
    python3.11 -m venv "$venv"
fi

# Skip pip entirely when the installed set already matches the requirements file.
want="$(sha256sum "$reqs" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi

# The machine's pip config lists local find-links dirs that may not exist; pip warns about each
# one on every lookup, so drop just those lines to keep the install quiet.
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$reqs" \
    2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
echo "$want" > "$stamp"
