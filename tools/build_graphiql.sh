#!/usr/bin/env bash
# Vendor GraphiQL and its browser dependencies into graph/ide/assets/ so the IDE works offline.
#
# Every package is fetched from the npm registry at a pinned version and checked against the
# registry's sha512 integrity recorded below, so a rerun reproduces the committed files exactly.
# GraphiQL 3.x is used because it is the last line shipping a prebuilt UMD bundle (plain
# <script> tags, no bundler); it already contains graphql-js, @graphiql/toolkit and the
# graphql-ws client. React 18.3.1 is the last React with UMD builds.
#
# Usage: tools/build_graphiql.sh   (needs node + npm)
set -euo pipefail

PACKAGES=(
  "graphiql 3.9.0 sha512-rJYFlHdBbug9+YbFSwRVvgfPjCayC7wHecZkx/qB4XLuQPFQZw/yB9pmHFtOJV6RiNBBHro3u1GdocKa3YcGRA=="
  "@graphiql/plugin-explorer 3.2.6 sha512-MXzG/zVNzZfes4Em253bHyAbD/lwwAZkPKvxCAQkjz0i3dtcv4uF3D8iqJ7214iu3SCphbORYZZUC93fik1yew=="
  "react 18.3.1 sha512-wS+hAgJShR0KhEvPJArfuPVN1+Hz1t0Y6n5jLrGQbkb4urgPE/0Rve+1kMB1v/oWgHgm4WIcV+i7F2pTVj+2iQ=="
  "react-dom 18.3.1 sha512-5m4nQKp+rZRb09LNH59GM4BxTh9251/ylbKIbpe7TpGxfJ+9kv6BLkLBXIjjspbgbnIBNqlI23tRnTWT0snUIw=="
  # Only for its LICENSE: the explorer plugin bundles it.
  "graphiql-explorer 0.9.0 sha512-fZC/wsuatqiQDO2otchxriFO0LaWIo/ovF/CQJ1yOudmY0P7pzDiP+l9CEHUiWbizk3e99x6DQG4XG1VxA+d6A=="
)

repo=$(cd "$(dirname "$0")/.." && pwd)
dest="$repo/graph/ide/assets"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

manifest="$tmp/VERSIONS.txt"
for entry in "${PACKAGES[@]}"; do
  read -r name version integrity <<<"$entry"
  # `npm pack` downloads just the published tarball (no dependency tree, no install scripts).
  got=$(cd "$tmp" && npm pack --json --silent "$name@$version" |
    node -e 'const [p] = JSON.parse(require("fs").readFileSync(0)); console.log(p.integrity, p.filename)')
  read -r got_integrity filename <<<"$got"
  if [[ "$got_integrity" != "$integrity" ]]; then
    echo "integrity mismatch for $name@$version: $got_integrity" >&2
    exit 1
  fi
  mkdir -p "$tmp/$name"
  tar -xzf "$tmp/$filename" -C "$tmp/$name" --strip-components=1
  echo "$name@$version $integrity" >>"$manifest"
done

rm -rf "$dest"
mkdir -p "$dest/licenses"
cp "$tmp/graphiql/graphiql.min.js" "$tmp/graphiql/graphiql.min.css" "$dest/"
cp "$tmp/@graphiql/plugin-explorer/dist/index.umd.js" "$dest/plugin-explorer.umd.js"
cp "$tmp/@graphiql/plugin-explorer/dist/style.css" "$dest/plugin-explorer.css"
cp "$tmp/react/umd/react.production.min.js" "$tmp/react-dom/umd/react-dom.production.min.js" "$dest/"
# Source maps are not shipped; drop the references so browsers do not request them.
sed -i '/^\/\/# sourceMappingURL=/d' "$dest"/*.js

cp "$tmp/graphiql/LICENSE" "$dest/licenses/graphiql.txt"
cp "$tmp/react/LICENSE" "$dest/licenses/react.txt"
cp "$tmp/react-dom/LICENSE" "$dest/licenses/react-dom.txt"
cp "$tmp/graphiql-explorer/LICENSE" "$dest/licenses/graphiql-explorer.txt"
# @graphiql/plugin-explorer publishes no LICENSE file; record what its package.json declares.
node -e '
  const p = require(process.argv[1]);
  console.log(`${p.name}@${p.version} is licensed "${p.license}" per its package.json`);
  console.log(`(source: ${p.repository.url}, ${p.repository.directory}).`);
  console.log("It is published without a LICENSE file; see graphiql.txt for the project MIT text.");
' "$tmp/@graphiql/plugin-explorer/package.json" >"$dest/licenses/graphiql-plugin-explorer.txt"
cp "$manifest" "$dest/VERSIONS.txt"

ls -l "$dest" "$dest/licenses"
