// Terminal escaping: a hostile repository's every printed field reaches the terminal escaped
// (git's own output included), and records that claim one ref twice, have the wrong types, or name
// a target their packs do not hold are refused with our sentence.
import path from 'node:path';
import { hashedRefKey, refKey } from 'knotless-core/records/ref-key';
import { commitFiles } from '../helpers/git.ts';
import { lastLine, type FaultCase } from './checks.ts';
import { HOSTILE_TEXT, agentLog, clean, okOrSaid, parentOf, putAt } from './escape-data.ts';
import { forgedRepo, pushedRepo, putRef, refusedClone } from './hostile-data.ts';

/** Every case of a hostile repository's fields reaching the terminal. */
export const ESCAPE_CASES: FaultCase[] = [
  {
    group: 'hostile',
    name: 'escape: a repository description full of ESC, OSC, newlines, C1 and bidi',
    expected: 'info ok; list ok; json keeps the value; no raw control character',
    async run(env) {
      const { name } = await env.repo('esc-desc');
      await env.pdsPost('com.atproto.repo.putRecord', {
        repo: env.did,
        collection: 'dev.knotless.repo',
        rkey: name,
        record: { $type: 'dev.knotless.repo', description: HOSTILE_TEXT, createdAt: HOSTILE_TEXT },
      });
      const info = await env.alice.knotless('repo', 'info', `alice.test/${name}`);
      const list = await env.alice.knotless('repo', 'list', 'alice.test');
      const infoJson = await env.alice.knotless('repo', 'info', `alice.test/${name}`, '--json');
      const listJson = await env.alice.knotless('repo', 'list', 'alice.test', '--json');
      const parsed = JSON.parse(infoJson.stdout) as { description?: string };
      const listed = (JSON.parse(listJson.stdout) as Array<{ name: string; description?: string }>).find(
        (r) => r.name === name,
      );
      const kept = parsed.description === HOSTILE_TEXT && listed?.description === HOSTILE_TEXT;
      const shown = info.stdout.includes('\\x1b[2J') && list.stdout.includes('\\u{202e}gnp.exe');
      return [
        info.code === 0 && shown ? 'info ok' : `info: ${okOrSaid(info)}`,
        list.code === 0 ? 'list ok' : `list: ${okOrSaid(list)}`,
        kept ? 'json keeps the value' : 'json lost the value',
        clean(info, list, infoJson, listJson),
      ].join('; ');
    },
  },
  {
    group: 'hostile',
    name: 'escape: ref records whose ref name or repo field hold control characters',
    expected:
      'ls-remote ok; clone ok; fetch ok; each record refused with an escaped warning; a push of such a name refused; no raw control character',
    async run(env) {
      const { name, url, tip, packs } = await pushedRepo(env, 'esc-refs');
      const evil = [
        'refs/heads/\u202egnp.exe',
        'refs/heads/a\u009b2J',
        'refs/heads/b\u2028c',
        'refs/tags/\u0085x',
      ];
      for (const ref of evil) await putRef(env, name, ref, { target: tip, packs });
      await putAt(env, refKey(name, 'refs/heads/other'), {
        repo: HOSTILE_TEXT,
        ref: 'refs/heads/other',
        target: tip,
        packs,
      });
      await putAt(env, `${name}~refs_heads_x`, {
        repo: name,
        ref: `refs/heads/x${HOSTILE_TEXT}`,
        target: tip,
        packs,
      });
      const dir = env.alice.dir();
      const ls = await env.alice.git(dir, 'ls-remote', url);
      const clone = await env.alice.git(dir, 'clone', url, 'c');
      const fetch = await env.alice.git(path.join(dir, 'c'), 'fetch', '-v', 'origin');
      const work = path.join(dir, 'c');
      const bidi = await env.alice.git(work, 'push', 'origin', 'HEAD:refs/heads/\u202eevil');
      const warnings = (clone.stderr.match(/^knotless: warning: /gm) ?? []).length;
      const listed = ls.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[1]);
      return [
        ls.code === 0 && listed.join(',') === 'HEAD,refs/heads/main'
          ? 'ls-remote ok'
          : `ls-remote: ${okOrSaid(ls)} ${listed.join(',')}`,
        `clone ${okOrSaid(clone)}`,
        `fetch ${okOrSaid(fetch)}`,
        warnings === evil.length + 2 &&
        clone.stderr.includes('\\u{202e}gnp.exe') &&
        clone.stderr.includes('\\x1b]0;owned')
          ? 'each record refused with an escaped warning'
          : `${warnings} warnings: ${lastLine(clone.stderr)}`,
        bidi.code !== 0 && /holds characters that act on a terminal/.test(bidi.stderr)
          ? 'a push of such a name refused'
          : `push: ${okOrSaid(bidi)}`,
        clean(ls, clone, fetch),
      ].join('; ');
    },
  },
  {
    group: 'hostile',
    name: 'escape: a PDS error message full of control characters',
    expected: 'clone refused; repo list refused; both quote it escaped; no raw control character',
    async run(env) {
      const { url } = await env.repo('esc-pds');
      env.proxy.inject({
        nsid: 'com.atproto.repo.listRecords',
        times: Infinity,
        fault: { kind: 'status', status: 400, error: `Invalid\u001b[2J`, message: HOSTILE_TEXT },
      });
      const clone = await env.alice.git(env.alice.dir(), 'clone', url, 'c');
      const list = await env.alice.knotless('repo', 'list');
      const quoted = [clone, list].every((r) => r.stderr.includes('\\x1b]0;owned\\x07\\r\\n'));
      return [
        clone.code !== 0 ? 'clone refused' : 'clone ok',
        list.code !== 0 ? 'repo list refused' : 'repo list ok',
        quoted ? 'both quote it escaped' : `said: ${lastLine(clone.stderr)} / ${lastLine(list.stderr)}`,
        clean(clone, list),
      ].join('; ');
    },
  },
  {
    group: 'hostile',
    name: "escape: the agent's log of hostile records and a hostile PDS message",
    expected: 'both logged escaped; no raw control character',
    async run(env) {
      const { name, tip, packs } = await pushedRepo(env, 'esc-agent');
      await putRef(env, name, 'refs/heads/\u202egnp.exe', { target: tip, packs });
      await putAt(env, refKey(name, 'refs/heads/other'), {
        repo: HOSTILE_TEXT,
        ref: 'refs/heads/other',
        target: tip,
        packs,
      });
      const broken = (await env.repo('esc-agent-pds')).name;
      const hostile = () =>
        env.proxy.inject({
          nsid: 'com.atproto.repo.listRecords',
          times: Infinity,
          fault: { kind: 'status', status: 400, error: 'Invalid', message: HOSTILE_TEXT },
        });
      const log = await agentLog(env, [
        { repo: name, until: /gnp\.exe/ },
        // Then every listing fails with a message a hostile server chose.
        { repo: broken, before: hostile, until: /esc-agent-pds/ },
      ]);
      const escaped =
        log.includes('\\u{202e}gnp.exe') && log.includes('\\x1b]0;owned') && log.includes('\\x9b2J');
      return `${escaped ? 'both logged escaped' : `logged: ${log}`}; ${clean({ code: 0, stdout: '', stderr: log })}`;
    },
  },
  {
    group: 'hostile',
    name: 'records: two records claiming one ref',
    expected:
      'left out with one sentence; clone has no main; push refused, records unchanged; delete removed both',
    async run(env) {
      const { name, url, tip } = await pushedRepo(env, 'dup-refs');
      const ordinary = await env.getRecord('dev.knotless.ref', refKey(name, 'refs/heads/main'));
      // The same ref under its hashed key, pointing at the first commit: which is "main"?
      const first = (ordinary.value['packs'] as unknown[]).slice(0, 1);
      await putAt(env, hashedRefKey(name, 'refs/heads/main'), {
        repo: name,
        ref: 'refs/heads/main',
        packs: first,
        target: await parentOf(env, url, tip),
      });
      const dir = env.alice.dir();
      const ls = await env.alice.git(dir, 'ls-remote', url);
      const sentences = ls.stderr
        .split('\n')
        .filter((l) => /2 records for the ref refs\/heads\/main/.test(l));
      const clone = await env.alice.git(dir, 'clone', url, 'c');
      const work = path.join(dir, 'w');
      await env.alice.ok(dir, 'init', '-q', work);
      await commitFiles(env.alice, work, { 'x.txt': 'x\n' }, 'x');
      // Forced, so that git hands the update to the helper instead of refusing it as "fetch first".
      const push = await env.alice.git(work, 'push', url, '+HEAD:refs/heads/main');
      const after = await env.getRecord('dev.knotless.ref', refKey(name, 'refs/heads/main'));
      const hashed = await env.getRecord('dev.knotless.ref', hashedRefKey(name, 'refs/heads/main'));
      const unchanged = after.cid === ordinary.cid && hashed.value['target'] !== undefined;
      const del = await env.alice.git(work, 'push', url, ':refs/heads/main');
      const gone = await env.alice.git(dir, 'ls-remote', url);
      const leftKeys = await Promise.all(
        [refKey(name, 'refs/heads/main'), hashedRefKey(name, 'refs/heads/main')].map((k) =>
          fetch(
            `${env.t.net.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${env.did}&collection=dev.knotless.ref&rkey=${encodeURIComponent(k)}`,
          ).then((r) => r.status),
        ),
      );
      return [
        ls.code === 0 && sentences.length === 1 && !/refs\/heads\/main/.test(ls.stdout)
          ? 'left out with one sentence'
          : `ls-remote: ${ls.stdout.trim()} / ${sentences.length} sentences`,
        clone.code === 0 &&
        !(await env.alice.git(path.join(dir, 'c'), 'rev-parse', '-q', '--verify', 'refs/remotes/origin/main'))
          .stdout
          ? 'clone has no main'
          : `clone: ${okOrSaid(clone)}`,
        push.code !== 0 && /several records claim this ref/.test(push.stderr) && unchanged
          ? 'push refused, records unchanged'
          : `push: ${okOrSaid(push)}; unchanged ${unchanged}`,
        del.code === 0 && leftKeys.every((s) => s === 400) && !/main/.test(gone.stdout)
          ? 'delete removed both'
          : `delete: ${okOrSaid(del)} ${leftKeys.join(',')}`,
      ].join('; ');
    },
  },
  {
    group: 'hostile',
    name: 'records: mistyped fields (packs not a list, a numeric target, no updatedAt)',
    expected: 'each refused with a warning; the rest cloned',
    async run(env) {
      const { name, url, tip, packs } = await pushedRepo(env, 'mistyped');
      await putRef(env, name, 'refs/heads/a', { target: tip, packs: 'notarray' });
      await putRef(env, name, 'refs/heads/b', { target: 12, packs });
      await putRef(env, name, 'refs/heads/c', { target: tip, packs, updatedAt: 5 });
      await putRef(env, name, 'refs/heads/d', { target: tip, packs: [{ ...packs[0], size: '32' }] });
      const out = env.alice.dir();
      const clone = await env.alice.git(out, 'clone', url, 'c');
      const says = [
        /a has a pack list that is not a list/,
        /b has a target that is not a string/,
        /c has no updatedAt/,
        /lacks its id, size or count/,
      ];
      const branches = (await env.alice.git(path.join(out, 'c'), 'branch', '-r')).stdout;
      return [
        says.every((re) => re.test(clone.stderr))
          ? 'each refused with a warning'
          : `said: ${clone.stderr.trim()}`,
        clone.code === 0 && !/origin\/[abcd]\b/.test(branches)
          ? 'the rest cloned'
          : `clone: ${okOrSaid(clone)} ${branches}`,
      ].join('; ');
    },
  },
  {
    group: 'hostile',
    name: 'records: a ref whose target is in none of its packs',
    expected:
      'refused; clear message; nothing written; no hang; refused; clear message; nothing written; no hang',
    async run(env) {
      const { packs } = await pushedRepo(env, 'notarget-src');
      const elsewhere = 'b'.repeat(40);
      const a = await forgedRepo(env, 'notarget', elsewhere, packs);
      const b = await forgedRepo(env, 'nopacks', elsewhere, []);
      const one = await refusedClone(env, a.url, /do not hold the object it names/);
      const two = await refusedClone(env, b.url, /do not hold the object it names/);
      return `${one}; ${two}`;
    },
  },
];
