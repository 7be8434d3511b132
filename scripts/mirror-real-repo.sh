#!/usr/bin/env bash
# Hand-run acceptance check: mirror a real repository into a new knotless repository, clone it back,
# and check that every ref and object survived the round trip.
#
# Needs a shell that has sourced a `knotless dev` env file (or is otherwise logged in), so that
# `knotless` and `git-remote-knotless` are on PATH.
#
# usage: scripts/mirror-real-repo.sh <path-to-local-git-repo-or-bare-repo> [repo-name]
set -euo pipefail

usage() {
  echo "usage: $0 <path-to-local-git-repo-or-bare-repo> [repo-name]" >&2
  exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
src=$1
name=${2:-mirror-$(date +%s)}

for cmd in git knotless git-remote-knotless; do
  command -v "$cmd" >/dev/null || {
    echo "$cmd is not on PATH; source the env file \`knotless dev\` printed first." >&2
    exit 2
  }
done
src_git_dir=$(git -C "$src" rev-parse --absolute-git-dir 2>/dev/null) || {
  echo "$src is not a git repository." >&2
  exit 2
}

# Wall-clock seconds with sub-second precision where bash (5.0+) offers it.
clock() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then echo "${EPOCHREALTIME/,/.}"; else date +%s; fi
}

# Runs a command as usual and leaves its wall time, in seconds, in $elapsed; returns its status.
timed() {
  local start status=0
  start=$(clock)
  "$@" || status=$?
  elapsed=$(awk -v a="$start" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }')
  return "$status"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/knotless-mirror.XXXXXX")
clone=$tmp/clone.git
result=FAIL
# The clone stays behind after a failure, to look into.
trap '[[ $result == PASS ]] && rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "(kept $tmp)" >&2
  exit 1
}

handle=$(knotless whoami | cut -d' ' -f1)
url=knotless://$handle/$name
knotless repo create "$name" >/dev/null

echo "== git push --mirror $url"
timed git -C "$src" push --mirror "$url" || fail "git push --mirror exited with $?"
push_time=$elapsed

echo "== git clone --mirror $url"
timed git clone --mirror "$url" "$clone" || fail "git clone --mirror exited with $?"
clone_time=$elapsed

# A mirror push sends every ref under refs/ (refs/remotes/*, notes and all) and a mirror clone
# fetches every ref under refs/, so the lists must match line for line. The one exception is git's
# own: it never pushes a ref with a single level under refs/, such as refs/stash, on any transport
# (the refname check in remote.c's one_local_ref), so those are left out of the source's list. A
# source holding a ref the PDS refuses would make the push fail above or the ref go missing here;
# either is a real failure of the round trip, not something to filter away.
format='%(objectname) %(refname)'
git -C "$src" for-each-ref --format="$format" >"$tmp/source.all"
grep -v ' refs/[^/]*$' "$tmp/source.all" >"$tmp/source.refs" || true
grep ' refs/[^/]*$' "$tmp/source.all" | cut -d' ' -f2 >"$tmp/unpushable" || true
git -C "$clone" for-each-ref --format="$format" >"$tmp/clone.refs"
refs_ok=yes
diff -u "$tmp/source.refs" "$tmp/clone.refs" >"$tmp/refs.diff" || refs_ok=no

echo "== git fsck --full (clone)"
fsck_ok=yes
git -C "$clone" fsck --full || fsck_ok=no

src_size=$(du -sh "$src_git_dir" | cut -f1)
clone_size=$(du -sh "$clone" | cut -f1)
ref_count=$(wc -l <"$tmp/source.refs" | tr -d ' ')

echo
echo "repository   $url"
echo "refs         $ref_count in source, $(wc -l <"$tmp/clone.refs" | tr -d ' ') in clone"
if [[ -s $tmp/unpushable ]]; then
  echo "not compared $(tr '\n' ' ' <"$tmp/unpushable")(git never pushes one-level refs)"
fi
echo "push         ${push_time}s"
echo "clone        ${clone_time}s"
echo "size         source $src_size ($src_git_dir), clone $clone_size"
echo "HEAD         source $(git -C "$src" symbolic-ref -q HEAD || echo detached)," \
  "clone $(git -C "$clone" symbolic-ref -q HEAD || echo detached)"

if [[ $refs_ok != yes ]]; then
  head -n 40 "$tmp/refs.diff" >&2
  fail "refs differ (full diff in $tmp/refs.diff)"
fi
[[ $fsck_ok == yes ]] || fail "git fsck --full found problems in the clone"
result=PASS
echo "PASS"
