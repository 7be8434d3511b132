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
