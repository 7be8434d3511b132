// The rule that computes a repository's refs from the tables of several writers (the owner and the
// maintainers the owner names), as docs/reference/format.md ("Teams") states it: one function, so
// that every reader (helper, CLI, agent, appview) computes the same refs from the same records. It
// reads nothing but the entries: which accounts count, and reading their tables, is the caller's.

/** One writer's entry for a ref: its value (or a tombstone) and the values of others it replaced. */
export interface TeamEntry {
  /** The commit or tag the ref points at; absent for a tombstone (the writer deleted the ref). */
  target?: string;
  /** For each other writer whose value this one replaced: their DID and that value (absent: none). */
  over: { did: string; target?: string }[];
}

/** One writer's table: whose it is, and its entries by ref name. */
export interface TeamTable {
  did: string;
  entries: ReadonlyMap<string, TeamEntry>;
}

/** A ref as the repository has it. */
export interface TeamRef {
  /** Its value; absent when the entry that counts is a tombstone (the ref is deleted). */
  target?: string;
  /** Whose entry it is. */
  by: string;
  /**
   * When no entry supersedes all the others: every other writer's value, to be listed apart
   * (`refs/maintainers/<handle>/…`) so that nothing acknowledged becomes unreachable.
   */
  divergent?: { did: string; target?: string }[];
}

/** Entry `c` (of writer `cBy`) supersedes `d` (of writer `dBy`): the same value, or `c` replaced `d`'s. */
export function supersedes(c: TeamEntry, d: TeamEntry, dBy: string): boolean {
  if (c.target === d.target) return true;
  return c.over.some((o) => o.did === dBy && o.target === d.target);
}

/** Whether `mine` (of writer `me`) supersedes every other writer's entry of the ref: a push may say `ok`. */
export function holdsAgainst(me: string, mine: TeamEntry, others: TeamTable[], ref: string): boolean {
  return others.every((t) => {
    if (t.did === me) return true;
    const theirs = t.entries.get(ref);
    return theirs === undefined || supersedes(mine, theirs, t.did);
  });
}

/** Orders writers for a choice among equals: the owner first, then by DID as bytes. */
function preferred(owner: string) {
  return (a: string, b: string): number =>
    a === owner ? -1 : b === owner ? 1 : Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * The repository's refs from the owner's table and the maintainers' (`tables`, the owner's among
 * them; a table twice, or a writer the caller did not vet, is the caller's mistake). For each ref
 * some writer has an entry for, the entry that supersedes every other writer's. When none does (a
 * divergence), the values still standing are those of the entries no entry with another value
 * supersedes: a value some writer replaced is contained in the value that replaced it (or was forced
 * away), so listing it again would only repeat history. Of those, the owner's counts, else the one
 * of the writer whose DID sorts first, and the others are `divergent`. A ref whose entry that counts
 * is a tombstone is returned with no target (deleted).
 */
export function teamRefs(owner: string, tables: TeamTable[]): Map<string, TeamRef> {
  const order = preferred(owner);
  const writers = [...tables].sort((a, b) => order(a.did, b.did));
  const names = new Set(writers.flatMap((t) => [...t.entries.keys()]));
  const out = new Map<string, TeamRef>();
  for (const name of [...names].sort()) {
    const candidates = writers.flatMap((t) => {
      const e = t.entries.get(name);
      return e === undefined ? [] : [{ did: t.did, entry: e }];
    });
    const winner = candidates.find((c) =>
      candidates.every((d) => d.did === c.did || supersedes(c.entry, d.entry, d.did)),
    );
    if (winner !== undefined) {
      out.set(name, { ...valueOf(winner.entry), by: winner.did });
      continue;
    }
    // No entry holds against all: the values standing are those no other value replaced (every
    // value, should each have been replaced by another, which only forced pushes can do).
    const standing = candidates.filter(
      (d) =>
        !candidates.some(
          (c) => c.did !== d.did && c.entry.target !== d.entry.target && supersedes(c.entry, d.entry, d.did),
        ),
    );
    const heads = new Set((standing.length > 0 ? standing : candidates).map((c) => c.entry.target));
    // Each standing value once, named by the preferred writer that holds it.
    const shown = candidates.filter(
      (c, i) =>
        heads.has(c.entry.target) && candidates.findIndex((d) => d.entry.target === c.entry.target) === i,
    );
    const [first, ...others] = shown as [Candidate, ...Candidate[]];
    out.set(name, {
      ...valueOf(first.entry),
      by: first.did,
      ...(others.length === 0 ? {} : { divergent: others.map((c) => ({ did: c.did, ...valueOf(c.entry) })) }),
    });
  }
  return out;
}

interface Candidate {
  did: string;
  entry: TeamEntry;
}

function valueOf(e: TeamEntry): { target?: string } {
  return e.target === undefined ? {} : { target: e.target };
}
