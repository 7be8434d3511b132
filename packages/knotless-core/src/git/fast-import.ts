// One commit as a `git fast-import` stream (gitfast-import(1)): blobs, trees and the commit are made
// by one git process instead of one per step (read-tree, hash-object per file, update-index,
// write-tree, commit-tree), each of which costs a process start on every `repo commit`.
import { KnotlessError } from '../errors.ts';

/** A change to the tree, with the new file's bytes. */
export type TreeChange =
  { kind: 'add'; path: string; executable: boolean; content: Uint8Array } | { kind: 'delete'; path: string };

/** Everything one commit needs. */
export interface CommitSpec {
  /** The ref fast-import updates when done (a scratch ref of the mirror). */
  ref: string;
  parent: string | undefined;
  /** `Name <email> <seconds> <tz>`, as `git var` prints identities. */
  author: string;
  committer: string;
  message: string;
  changes: TreeChange[];
}

/** A path in fast-import's C-style quotes: `"`, `\` and control characters escaped, UTF-8 as is. */
export function quotePath(p: string): string {
  let out = '"';
  for (const ch of p) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (code < 0x20 || code === 0x7f) out += `\\${code.toString(8).padStart(3, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** The stream that makes the commit, marks it :1 and asks fast-import to print its id. */
export function writeCommitStream(c: CommitSpec): Buffer {
  const parts: Buffer[] = [];
  const text = (s: string) => parts.push(Buffer.from(s, 'utf8'));
  const data = (bytes: Uint8Array) => {
    text(`data ${bytes.length}\n`);
    parts.push(Buffer.from(bytes));
    text('\n');
  };
  text(`commit ${c.ref}\nmark :1\nauthor ${c.author}\ncommitter ${c.committer}\n`);
  data(Buffer.from(c.message, 'utf8'));
  if (c.parent !== undefined) text(`from ${c.parent}\n`);
  for (const ch of c.changes) {
    if (ch.kind === 'delete') text(`D ${quotePath(ch.path)}\n`);
    else {
      text(`M ${ch.executable ? '100755' : '100644'} inline ${quotePath(ch.path)}\n`);
      data(ch.content);
    }
  }
  text('\nget-mark :1\ndone\n');
  return Buffer.concat(parts);
}

/** GIT_AUTHOR_IDENT and GIT_COMMITTER_IDENT from `git var -l`. */
export function parseIdents(varList: string): { author: string; committer: string } {
  const get = (name: string) => new RegExp(`^${name}=(.*)$`, 'm').exec(varList)?.[1];
  const author = get('GIT_AUTHOR_IDENT');
  const committer = get('GIT_COMMITTER_IDENT');
  if (author === undefined || committer === undefined)
    throw new KnotlessError(
      'usage',
      'git does not know who you are: set user.name and user.email (git config --global), or GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL.',
    );
  return { author, committer };
}
