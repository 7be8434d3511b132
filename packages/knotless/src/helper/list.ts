import type { RemoteRef } from 'knotless-core/records/remote-repo';

/**
 * The answer to `list` / `list for-push`. HEAD is a symref line (so a clone checks out the default
 * branch) only when its target exists, and is left out for push (else `--mirror` would push `:HEAD`).
 * Annotated tags get a `^{}` line so that fetches follow them.
 */
export function formatList(refs: Map<string, RemoteRef>, forPush: boolean): string[] {
  const lines: string[] = [];
  const head = refs.get('HEAD')?.record.symref;
  if (!forPush && head !== undefined && refs.has(head)) lines.push(`@${head} HEAD`);
  const names = [...refs.keys()].filter((n) => n !== 'HEAD').sort();
  for (const name of names) {
    const r = refs.get(name)!.record;
    lines.push(`${r.target} ${name}`);
    if (!forPush && r.peeled !== undefined && r.peeled !== r.target) lines.push(`${r.peeled} ${name}^{}`);
  }
  return lines;
}

/**
 * Refs inside another listed ref (`refs/heads/a/b` beside `refs/heads/a`), each with the one it is
 * inside. knotless refuses to push such a pair, but another tool may write the records; no git
 * repository can hold both, so a fetch or clone would stop at "cannot lock ref". A fetch is shown
 * the outer ref only; a push sees both, so that the owner can delete one.
 */
export function nestedRefs(names: Iterable<string>): Map<string, string> {
  const all = new Set(names);
  const inner = new Map<string, string>();
  for (const name of all) {
    const parts = name.split('/');
    for (let i = 2; i < parts.length; i++) {
      const outer = parts.slice(0, i).join('/');
      if (all.has(outer)) {
        inner.set(name, outer);
        break;
      }
    }
  }
  return inner;
}
