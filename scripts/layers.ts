// The layers of each package, read from docs/architecture.md ("Which may import which"), and the
// imports that break them. The doc's tables are the rule: `npm run cycles` fails on an import that
// runs back up a layer or across folders of one layer, and on a folder or top-level file no table
// names (a new folder must be given its place).

/** For each package (`knotless-core`), the layer of each of its units (`records/`, `index.ts`). */
export type Layers = Map<string, Map<string, number>>;

/**
 * Reads every table that follows a line `**\`packages/<name>/src\`**`: each row is
 * `| <layer> | <units, each in backticks> | ... |`.
 */
export function parseLayers(markdown: string): Layers {
  const layers: Layers = new Map();
  let current: Map<string, number> | undefined;
  for (const line of markdown.split('\n')) {
    const heading = /^\*\*`packages\/([a-z-]+)\/src`\*\*$/.exec(line.trim());
    if (heading !== null) {
      current = new Map();
      layers.set(heading[1]!, current);
      continue;
    }
    if (current === undefined) continue;
    const row = /^\|\s*(\d+)\s*\|([^|]*)\|/.exec(line);
    if (row !== null) {
      for (const m of row[2]!.matchAll(/`([^`]+)`/g)) current.set(m[1]!, Number(row[1]));
    } else if (!line.startsWith('|') && line.trim() !== '') {
      current = undefined;
    }
  }
  return layers;
}

/** The unit a file belongs to: its folder under `src/` (`records/`), or the file itself (`index.ts`). */
export function unitOf(pathInSrc: string): string {
  const slash = pathInSrc.indexOf('/');
  return slash === -1 ? pathInSrc : pathInSrc.slice(0, slash + 1);
}

/**
 * The imports that break the layers, one sentence each. `graph` is madge's: each file (as
 * `<package>/src/<path>`) with the files it imports, the same way named.
 */
export function layerViolations(graph: Record<string, string[]>, layers: Layers): string[] {
  const problems = new Set<string>();
  const place = (file: string) => {
    const m = /^([^/]+)\/src\/(.+)$/.exec(file);
    if (m === null) return undefined;
    const unit = unitOf(m[2]!);
    return { pkg: m[1]!, unit, layer: layers.get(m[1]!)?.get(unit) };
  };
  for (const [from, tos] of Object.entries(graph)) {
    const a = place(from);
    if (a === undefined) continue;
    if (a.layer === undefined && layers.has(a.pkg))
      problems.add(`${a.pkg}/src/${a.unit} has no layer in docs/architecture.md: give it its place there`);
    for (const to of tos) {
      const b = place(to);
      if (b === undefined || b.pkg !== a.pkg || b.unit === a.unit) continue;
      if (a.layer === undefined || b.layer === undefined) continue;
      if (b.layer < a.layer)
        problems.add(`${from} imports ${to}, which is above it (layer ${b.layer} over ${a.layer})`);
      else if (b.layer === a.layer)
        problems.add(`${from} imports ${to}, another part of its own layer (${a.layer})`);
    }
  }
  return [...problems].sort();
}
