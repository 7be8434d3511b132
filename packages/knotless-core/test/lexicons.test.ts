import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { Lexicons, jsonToLex, type LexiconDoc } from '@atproto/lexicon';
import { writeRefRecord } from '../src/records/ref-record.ts';
import { applyRefUpdates, layoutRefTable } from '../src/records/ref-table.ts';
import { newRing, wrapRing } from '../src/private/ring.ts';
import { RepoSealer } from '../src/private/sealer.ts';
import { writePrivate } from '../src/private/repo-keys.ts';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'lexicons');

function loadAll(): Lexicons {
  const docs: LexiconDoc[] = [];
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.json')) docs.push(JSON.parse(fs.readFileSync(p, 'utf8')) as LexiconDoc);
    }
  };
  walk(root);
  return new Lexicons(docs);
}

describe('lexicons', () => {
  it('are valid lexicon documents', () => {
    const lex = loadAll();
    assert.ok(lex.get('dev.knotless.repo'));
    assert.ok(lex.get('dev.knotless.ref'));
  });

  it('accept the records knotless writes', () => {
    const lex = loadAll();
    lex.assertValidRecord('dev.knotless.repo', {
      $type: 'dev.knotless.repo',
      description: 'd',
      createdAt: new Date().toISOString(),
    });
    const oid = 'a'.repeat(40);
    const written = writeRefRecord({
      repo: 'hello',
      ref: 'refs/tags/v1',
      target: oid,
      peeled: 'b'.repeat(40),
      packs: [
        { id: 'c'.repeat(40), size: 40, count: 1, inline: new Uint8Array(40) },
        {
          id: 'd'.repeat(40),
          size: 100,
          count: 2,
          parts: [
            {
              $type: 'blob',
              ref: { $link: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
              mimeType: 'application/x-git-packed-objects',
              size: 100,
            },
          ],
        },
      ],
      updatedAt: new Date().toISOString(),
    });
    lex.assertValidRecord('dev.knotless.ref', jsonToLex(JSON.parse(JSON.stringify(written)) as never));
    const head = writeRefRecord({
      repo: 'hello',
      ref: 'HEAD',
      symref: 'refs/heads/main',
      packs: [],
      updatedAt: new Date().toISOString(),
    });
    lex.assertValidRecord('dev.knotless.ref', jsonToLex(JSON.parse(JSON.stringify(head)) as never));
  });

  it('accept a ref table, small and in parts, as knotless lays it out', async () => {
    const lex = loadAll();
    const repo = 'at://did:plc:abc/dev.knotless.repo/hello';
    const pack = (n: number) => ({
      id: n.toString(16).padStart(40, 'c'),
      size: 40,
      count: 1,
      inline: new Uint8Array(40),
    });
    const updates = Array.from({ length: 3000 }, (_, i) => ({
      ref: `refs/heads/b${i}`,
      target: 'a'.repeat(40),
      packs: [pack(0), pack(i + 1)],
      ...(i === 0 ? { over: [{ did: 'did:plc:ann', target: 'b'.repeat(40) }] } : {}),
    }));
    const t = applyRefUpdates(
      undefined,
      updates,
      { repo, head: 'refs/heads/b0', maintainer: false },
      new Date(),
    );
    const small = await layoutRefTable({ ...t, refs: t.refs.slice(0, 3) }, 'hello', () =>
      Promise.resolve(''),
    );
    lex.assertValidRecord('dev.knotless.refs', jsonToLex(JSON.parse(JSON.stringify(small.table)) as never));
    const cid = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm';
    const large = await layoutRefTable(t, 'hello', () => Promise.resolve(cid));
    assert.ok(large.create.length > 1);
    lex.assertValidRecord('dev.knotless.refs', jsonToLex(JSON.parse(JSON.stringify(large.table)) as never));
    for (const p of large.create)
      lex.assertValidRecord(
        'dev.knotless.refs.part',
        jsonToLex(JSON.parse(JSON.stringify(p.value)) as never),
      );
  });

  it('accept the records of a private repository and a device key', async () => {
    const lex = loadAll();
    const valid = (nsid: string, v: unknown) =>
      lex.assertValidRecord(nsid, jsonToLex(JSON.parse(JSON.stringify(v)) as never));
    const recipient = 'age1' + 'q'.repeat(58);
    const ring = newRing();
    const field = writePrivate({
      epoch: 0,
      members: [{ did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa', keys: [recipient] }],
      ring: await wrapRing(ring, ['age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj']),
    });
    valid('dev.knotless.repo', {
      $type: 'dev.knotless.repo',
      createdAt: new Date().toISOString(),
      private: field,
    });
    const sealer = await RepoSealer.create('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa', 'hello', ring);
    const blob = {
      $type: 'blob',
      ref: { $link: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
      mimeType: 'application/x-git-packed-objects',
      size: 141,
    } as const;
    const key = sealer.refKey('refs/heads/main');
    const sealed = sealer.seal(key, {
      repo: 'hello',
      ref: 'refs/heads/main',
      target: 'a'.repeat(40),
      packs: [{ id: 'd'.repeat(40), size: 100, count: 2, parts: [blob], sealed: { stored: 141, epoch: 0 } }],
      updatedAt: new Date().toISOString(),
    });
    valid('dev.knotless.ref', sealed);
    // The sealed contents are a plain record, as the lexicon's #pack says.
    assert.equal(sealer.open(key, sealed).packs[0]!.sealed?.stored, 141);
    valid('dev.knotless.key', {
      $type: 'dev.knotless.key',
      publicKey: recipient,
      label: 'laptop',
      createdAt: new Date().toISOString(),
    });
  });
});
