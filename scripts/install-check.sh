#!/usr/bin/env bash
# Installs knotless and knotless-serve as a user would: `npm pack`, then a global install into an
# empty prefix with the system's own Node and npm (not the workspace's Node 22). Then, against a dev
# network, on the system's Node and again on the oldest Node the packages support: pushes and
# clones through the installed helper, and starts the installed appview (its home page, a
# repository page, a plain `git clone` over its smart HTTP); the same again with no perl on PATH.
# Prints installed sizes.
# Run after `npm install` (which builds the bundles).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
dev_pid=""
serve_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The system's Node: PATH without the workspace's node_modules/.bin.
sys_path="$(printf '%s' "$PATH" | tr ':' '\n' | grep -v 'node_modules/.bin' | paste -sd: -)"
echo "system node: $(PATH="$sys_path" node --version), npm $(PATH="$sys_path" npm --version)"

# The oldest supported Node, the floor both packages' `engines` name, from the official builds
# that npm publishes as node-linux-<arch>.
floor="$(PATH="$sys_path" node -p "require('$root/packages/knotless/package.json').engines.node")"
[ "$(PATH="$sys_path" node -p "require('$root/packages/knotless-serve/package.json').engines.node")" = "$floor" ]
oldest="${floor#>=}.0"
arch="$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/')"
(cd "$work" && PATH="$sys_path" npm pack "node-linux-$arch@$oldest" --silent >/dev/null && mkdir oldest &&
  tar xzf node-linux-*.tgz -C oldest --strip-components=1)

# Usage: install PACKAGE — packs packages/PACKAGE, installs it globally, prints its size.
install() {
  (cd "$root" && PATH="$sys_path" npm pack -w "packages/$1" --pack-destination "$work" --silent >/dev/null)
  local tarball installed
  tarball="$(ls "$work/$1"-[0-9]*.tgz)"
  echo "$1: tarball $(basename "$tarball"), $(du -k "$tarball" | cut -f1) KiB"
  # From outside the workspace, as a user would: its .npmrc points node-gyp at the workspace's Node 22.
  # npm's warnings are shown, and one about a dependency that needs a newer Node than the package
  # says it runs on (EBADENGINE) fails the check: a user installing on that Node would see it.
  (cd "$work" && PATH="$sys_path" npm install -g --prefix "$work/prefix" --no-fund --no-audit --loglevel=warn "$tarball") \
    2>&1 | tee "$work/npm-$1.log"
  if grep -q EBADENGINE "$work/npm-$1.log"; then
    echo "install check: installing $1 on $(PATH="$sys_path" node --version) warned EBADENGINE (above)"
    exit 1
  fi
  installed="$work/prefix/lib/node_modules/$1"
  echo "$1: installed size $(du -sk "$installed" | cut -f1) KiB in $(find "$installed" -type f | wc -l) files," \
    "$(find "$installed/node_modules" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l) dependencies"
}
install knotless
# A dev network, run by the workspace (it needs the PDS and Node 22). It starts while the appview
# installs (better-sqlite3 compiles with node-gyp for the system's Node unless a prebuilt binary
# can be downloaded; one build serves every Node 20, which share one native ABI).
"$root/node_modules/.bin/node" "$root/packages/knotless/bin/knotless.cjs" dev --dir "$work/dev" >"$work/dev.log" 2>&1 &
dev_pid=$!
install knotless-serve
# A TypeScript program using the installed package compiles strictly, reading every declaration it
# ships (no skipLibCheck) and without @types/node: none may name a package the bundle holds.
mkdir -p "$work/consumer/node_modules"
ln -s "$work/prefix/lib/node_modules/knotless-serve" "$work/consumer/node_modules/knotless-serve"
printf '%s\n' '{"type":"module"}' >"$work/consumer/package.json"
printf '%s\n' '{"compilerOptions": {"strict": true, "noEmit": true, "skipLibCheck": false, "types": [],
  "module": "nodenext", "target": "es2022", "lib": ["es2022"]}, "files": ["consumer.ts"]}' >"$work/consumer/tsconfig.json"
cat >"$work/consumer/consumer.ts" <<'EOF_TS'
import { configFrom, defaultConfig, startAppview, type Appview } from 'knotless-serve';
const app: Appview = await startAppview({ ...defaultConfig('data'), ...configFrom(['--port', '0'], {}) });
await app.close();
EOF_TS
"$root/node_modules/.bin/tsc" -p "$work/consumer"
echo "install check: a strict TypeScript consumer compiles against the installed knotless-serve"
# On a Node with another native ABI (the workspace's 22), better-sqlite3's build for the system's Node
# cannot load: knotless-serve must say so in one sentence and stop.
ws_node="$root/node_modules/.bin/node"
if [ "$("$ws_node" -p process.versions.modules)" != "$(PATH="$sys_path" node -p process.versions.modules)" ]; then
  if out="$("$ws_node" "$work/prefix/bin/knotless-serve" --data "$work/abi" --port 0 2>&1)"; then
    echo "knotless-serve started with a native module built for another Node"
    exit 1
  fi
  grep -q "^knotless-serve: could not start: better-sqlite3, the SQLite driver, has no native build for Node $("$ws_node" --version)" <<<"$out" || { echo "$out"; exit 1; }
  echo "install check: on $("$ws_node" --version), another native ABI, knotless-serve stops with one sentence"
fi
for _ in $(seq 1 120); do grep -q '^ready$' "$work/dev.log" && break; sleep 0.5; done
grep -q '^ready$' "$work/dev.log" || { cat "$work/dev.log"; echo "the dev network did not start"; exit 1; }

# shellcheck disable=SC1091
. "$work/dev/env"
export HOME="$work/home" GIT_AUTHOR_NAME=ci GIT_AUTHOR_EMAIL=ci@example.com \
  GIT_COMMITTER_NAME=ci GIT_COMMITTER_EMAIL=ci@example.com
mkdir -p "$HOME"

# Usage: check NAME — runs the installed packages on the `node` first on PATH; NAME keeps each
# run's repository and directories apart.
check() {
  local name="$1" src="$work/$1/src" appview
  mkdir -p "$work/$name"
  [ "$(command -v git-remote-knotless)" = "$work/prefix/bin/git-remote-knotless" ]
  knotless --version
  knotless-serve --help | grep -q '^usage: knotless-serve'
  knotless whoami
  knotless repo create "$name" --description "pushed through an installed helper" >/dev/null
  git init -q -b main "$src"
  echo "hello from an installed knotless on $(node --version)" >"$src/README.md"
  git -C "$src" add README.md
  git -C "$src" commit -q -m first
  git -C "$src" push -q "knotless://alice.test/$name" main
  git clone -q "knotless://alice.test/$name" "$work/$name/copy"
  [ "$(git -C "$work/$name/copy" rev-parse HEAD)" = "$(git -C "$src" rev-parse HEAD)" ]
  cmp "$src/README.md" "$work/$name/copy/README.md"
  echo "install check: pushed and cloned through the installed helper on $(node --version)"

  # The installed appview follows the dev network's PDS like any other.
  knotless-serve --dev --data "$work/$name/serve" --port 0 --plc "$KNOTLESS_PLC_URL" \
    --firehose "${KNOTLESS_DEV_PDS/http/ws}" --backfill-pds "$KNOTLESS_DEV_PDS" >"$work/$name/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 60); do grep -q 'listening on ' "$work/$name/serve.log" && break; sleep 0.5; done
  appview="$(sed -n 's/^knotless-serve: listening on //p' "$work/$name/serve.log")"
  [ -n "$appview" ] || { cat "$work/$name/serve.log"; echo "the installed appview did not start"; exit 1; }
  # Backfill and mirroring run in the background: wait until the mirror serves the pushed commit.
  for _ in $(seq 1 60); do
    [ -n "$(git ls-remote "$appview/alice.test/$name" main 2>/dev/null)" ] && break
    sleep 0.5
  done
  grep -q "alice.test/$name" <<<"$(page "$appview/")"
  grep -q "hello from an installed knotless on $(node --version)" <<<"$(page "$appview/alice.test/$name")"
  git clone -q "$appview/alice.test/$name" "$work/$name/plain"
  [ "$(git -C "$work/$name/plain" rev-parse HEAD)" = "$(git -C "$src" rev-parse HEAD)" ]
  kill "$serve_pid" && wait "$serve_pid" && serve_pid=""
  echo "install check: the installed appview served pages and a plain git clone on $(node --version)"
}
# Usage: page URL — the page's HTML, failing unless it answers 200.
page() { node -e 'fetch(process.argv[1]).then(async (r) => { if (!r.ok) process.exit(1); process.stdout.write(await r.text()); })' "$1"; }

PATH="$work/prefix/bin:$sys_path" check system
PATH="$work/prefix/bin:$work/oldest/bin:$sys_path" check oldest

# A machine without Perl: every command of the system's PATH but perl's, so git's helper command (a
# shell script) runs the thin helper in Node. The push and clone above, then a push and a fetch
# again: the first push started the warm agent, so these go through the Node thin helper to it.
noperl="$work/noperl-bin"
mkdir -p "$noperl"
IFS=: read -ra sys_dirs <<<"$sys_path"
for dir in "${sys_dirs[@]}"; do
  for file in "$dir"/*; do
    base="$(basename "$file")"
    case "$base" in perl*) continue ;; esac
    if [ -f "$file" ] && [ -x "$file" ] && [ ! -e "$noperl/$base" ]; then ln -s "$file" "$noperl/$base"; fi
  done
done
if PATH="$work/prefix/bin:$noperl" command -v perl >/dev/null; then
  echo "install check: perl is still on the PATH meant to have none"
  exit 1
fi
PATH="$work/prefix/bin:$noperl" check noperl
(
  export PATH="$work/prefix/bin:$noperl"
  src="$work/noperl/src"
  git -C "$src" commit -q --allow-empty -m "again, without Perl"
  git -C "$src" push -q "knotless://alice.test/noperl" main
  git -C "$work/noperl/copy" pull -q
  [ "$(git -C "$work/noperl/copy" rev-parse HEAD)" = "$(git -C "$src" rev-parse HEAD)" ]
  knotless agent status --json | grep -q '"running":true'
)
echo "install check: pushed, cloned and fetched without Perl on PATH (the thin helper in Node)"

# OAuth on the installed CLI (the vendored client on the system's Node): the installed `knotless login`
# prints the dev PDS's sign-in address, headless Chromium (run by the workspace) approves it, and the
# OAuth session (which replaces the app-password one `knotless dev` saved) then pushes.
oauth_check() {
  local src="$work/system/src"
  knotless login alice.test --no-browser 2>"$work/login.log" &
  login_pid=$!
  for _ in $(seq 1 120); do grep -q '^  http' "$work/login.log" && break; sleep 0.5; done
  grep -q '^  http' "$work/login.log" || { cat "$work/login.log"; echo "knotless login printed no address"; exit 1; }
  "$root/node_modules/.bin/node" "$root/scripts/oauth-consent.ts" "$(grep -m1 '^  http' "$work/login.log" | tr -d ' ')" "$KNOTLESS_DEV_PASSWORD"
  wait "$login_pid" || { cat "$work/login.log"; echo "knotless login with OAuth failed"; exit 1; }
  knotless whoami 2>&1 | grep -q 'Logged in with OAuth' || { echo "whoami does not show the OAuth session"; exit 1; }
  git -C "$src" commit -q --allow-empty -m "pushed with OAuth"
  git -C "$src" push -q knotless://alice.test/system main
  knotless logout
  echo "install check: pushed with an OAuth session on $(node --version)"
}
PATH="$work/prefix/bin:$sys_path" oauth_check
echo "install check: done in ${SECONDS} s"
