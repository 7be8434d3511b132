#!/usr/bin/env bash
# Installs knotless as a user would: `npm pack`, then a global install into an empty prefix with the
# system's own Node and npm (not the workspace's Node 22), then pushes and clones through the
# installed helper against a dev network. Prints the installed size. Run after `npm install`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
dev_pid=""
cleanup() {
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The system's Node: PATH without the workspace's node_modules/.bin.
sys_path="$(printf '%s' "$PATH" | tr ':' '\n' | grep -v 'node_modules/.bin' | paste -sd: -)"
echo "system node: $(PATH="$sys_path" node --version), npm $(PATH="$sys_path" npm --version)"

(cd "$root" && PATH="$sys_path" npm pack -w packages/knotless --pack-destination "$work" --silent >/dev/null)
tarball="$(ls "$work"/knotless-*.tgz)"
echo "tarball: $(basename "$tarball"), $(du -k "$tarball" | cut -f1) KiB"
PATH="$sys_path" npm install -g --prefix "$work/prefix" --no-fund --no-audit --loglevel=error "$tarball"
installed="$work/prefix/lib/node_modules/knotless"
echo "installed size: $(du -sk "$installed" | cut -f1) KiB in $(find "$installed" -type f | wc -l) files," \
  "$(find "$installed/node_modules" -name package.json 2>/dev/null | wc -l) dependencies"
PATH="$work/prefix/bin:$sys_path" knotless --version

# A dev network, run by the workspace (it needs the PDS and Node 22).
"$root/node_modules/.bin/node" "$root/packages/knotless/bin/knotless.cjs" dev --dir "$work/dev" >"$work/dev.log" 2>&1 &
dev_pid=$!
for _ in $(seq 1 120); do grep -q '^ready$' "$work/dev.log" && break; sleep 0.5; done
grep -q '^ready$' "$work/dev.log" || { cat "$work/dev.log"; echo "the dev network did not start"; exit 1; }

# Everything below runs the installed knotless on the system's Node.
# shellcheck disable=SC1091
. "$work/dev/env"
export PATH="$work/prefix/bin:$sys_path" HOME="$work/home" GIT_AUTHOR_NAME=ci GIT_AUTHOR_EMAIL=ci@example.com \
  GIT_COMMITTER_NAME=ci GIT_COMMITTER_EMAIL=ci@example.com
mkdir -p "$HOME"
[ "$(command -v git-remote-knotless)" = "$work/prefix/bin/git-remote-knotless" ]
knotless whoami
knotless repo create installed --description "pushed through an installed helper" >/dev/null
git init -q -b main "$work/src"
echo "hello from an installed knotless" >"$work/src/README.md"
git -C "$work/src" add README.md
git -C "$work/src" commit -q -m first
git -C "$work/src" push -q knotless://alice.test/installed main
git clone -q knotless://alice.test/installed "$work/copy"
[ "$(git -C "$work/copy" rev-parse HEAD)" = "$(git -C "$work/src" rev-parse HEAD)" ]
cmp "$work/src/README.md" "$work/copy/README.md"

# OAuth on the installed CLI (the vendored client on the system's Node): the installed `knotless login`
# prints the dev PDS's sign-in address, headless Chromium (run by the workspace) approves it, and the
# OAuth session (which replaces the app-password one `knotless dev` saved) then pushes.
knotless login alice.test --no-browser 2>"$work/login.log" &
login_pid=$!
for _ in $(seq 1 120); do grep -q '^  http' "$work/login.log" && break; sleep 0.5; done
grep -q '^  http' "$work/login.log" || { cat "$work/login.log"; echo "knotless login printed no address"; exit 1; }
"$root/node_modules/.bin/node" "$root/scripts/oauth-consent.ts" "$(grep -m1 '^  http' "$work/login.log" | tr -d ' ')" "$KNOTLESS_DEV_PASSWORD"
wait "$login_pid" || { cat "$work/login.log"; echo "knotless login with OAuth failed"; exit 1; }
knotless whoami 2>&1 | grep -q 'Logged in with OAuth' || { echo "whoami does not show the OAuth session"; exit 1; }
git -C "$work/src" commit -q --allow-empty -m "pushed with OAuth"
git -C "$work/src" push -q knotless://alice.test/installed main
knotless logout
echo "install check: pushed and cloned through the installed helper on $(node --version), and pushed with an OAuth session"
