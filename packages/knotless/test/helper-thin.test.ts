import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy } from 'knotless-devnet';
import { spawnAgent } from './helpers/agent.ts';
import { runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useParity } from './helpers/parity.ts';

// With the warm agent running, git's helper process is thin: it forwards git's protocol to the agent,
// which runs the helper's code; without one, the whole helper runs in the process. Either way git sees
// the same answers, the same sentences on stderr and the same exit status.
const { t, plain, warm, other, ready, stopAgent, proxy, carriedByAgent } = useParity();
/**
 * The two thin helpers git's command (bin/git-remote-knotless) may run: the Perl one wherever perl is on
 * PATH, the Node one where it is not or KNOTLESS_THIN=node says so. Each case below runs with each.
 */
const THINS = [
  { name: 'in Perl', env: {} as Record<string, string> },
  { name: 'in Node', env: { KNOTLESS_THIN: 'node' } as Record<string, string> },
];
/** The thin helper of the cases running now (its environment). */
let thinEnv: Record<string, string> = {};
const perl = () => thinEnv['KNOTLESS_THIN'] !== 'node';
// A machine whose agent dies at a crash point (KNOTLESS_CRASH_AT) in the middle of a session.
let crashSocket = '';
const crashy = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_AGENT_SOCKET: crashSocket,
  KNOTLESS_COMPACT: '0',
  ...thinEnv,
}));
let probeDir = '';
let probe = '';

before(async () => {
  await t.ready;
  // Loaded into every Node helper process: on exit it writes the modules that process loaded, and how
  // the Perl helper handed it the session, if it did (read before the helper takes it out).
  probeDir = t.tmpdir();
  probe = path.join(probeDir, 'probe.cjs');
  fs.writeFileSync(
    probe,
    `if (/git-remote-knotless/.test(process.argv[1] || '')) { const h = process.env.KNOTLESS_THIN_HANDOFF; process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(probeDir)} + '/loaded-' + process.pid + '.json', JSON.stringify({ m: Object.keys(require.cache), h }))); }\n`,
  );
});

/** The modules each Node helper process `run` started loaded (one list per process), then forgets them. */
async function loadedBy(run: () => Promise<unknown>): Promise<string[][]> {
  return (await probed(run)).map((p) => p.m);
}

/** What each Node helper process `run` started loaded, and the Perl helper's handoff to it. */
async function probed(run: () => Promise<unknown>): Promise<Array<{ m: string[]; h?: string }>> {
  await run();
  const files = fs.readdirSync(probeDir).filter((f) => f.startsWith('loaded-'));
  const got = files.map(
    (f) => JSON.parse(fs.readFileSync(path.join(probeDir, f), 'utf8')) as { m: string[]; h?: string },
  );
  for (const f of files) fs.rmSync(path.join(probeDir, f));
  return got;
}

/** Runs `run` with `more` added to `user`'s environment. */
async function withEnv<T>(user: GitUser, more: Record<string, string>, run: () => Promise<T>): Promise<T> {
  const was = user.env;
  user.env = { ...was, ...more };
  try {
    return await run();
  } finally {
    user.env = was;
  }
}

let n = 0;
/** Where the proxy's log stood when the last transcript's steps began. */
let stepsFrom = 0;
/**
 * Runs `steps` (git command lines, `URL` for the remote; OTHER first: on the other machine) as `user`
 * in a new repository with one commit pushed to a new remote, and gives the transcript: each
 * command's exit status, stdout and stderr, with the remote's name and the directory made neutral.
 */
async function transcript(
  user: GitUser,
  steps: string[][],
  env: Record<string, string> = {},
  first: () => Promise<void> = async () => {},
): Promise<string> {
  await ready(user);
  const name = `thin-${++n}`;
  const made = await user.knotless('repo', 'create', name);
  assert.equal(made.code, 0, made.stderr);
  const url = `knotless://alice.test/${name}`;
  const dir = user.dir();
  await user.ok(dir, 'init', '-q');
  await user.ok(dir, 'remote', 'add', 'origin', url);
  await commitFiles(user, dir, { a: '1\n' }, 'one');
  await first();
  let out = '';
  stepsFrom = proxy().requests.length;
  for (const step of steps) {
    const who = step[0] === 'OTHER' ? other : user;
    const args = (step[0] === 'OTHER' ? step.slice(1) : step).map((a) => (a === 'URL' ? url : a));
    const res = await withEnv(who, who === user ? { ...thinEnv, ...env } : {}, () => who.git(dir, ...args));
    const neutral = (s: string) => s.replaceAll(url, 'URL').replaceAll(name, 'NAME').replaceAll(dir, 'DIR');
    out += `$ ${step.join(' ')} -> ${res.code}\n${neutral(res.stdout)}--\n${neutral(res.stderr)}`;
  }
  return out;
}

/**
 * The same steps directly and through the agent: the transcripts must be equal, every helper process
 * of the run through the agent was served by it (the Node one loaded only the thin helper: one that
 * ran the whole helper itself loaded its bundle, as without an agent; the Perl one started no Node at
 * all), and the agent carried every request of the steps to the PDS.
 */
async function same(steps: string[][]): Promise<string> {
  const direct = await transcript(plain, steps);
  let thin = '';
  const lists = await loadedBy(async () => {
    thin = await transcript(warm, steps, { NODE_OPTIONS: `--require ${probe}` });
  });
  const requests = proxy().requests.slice(stepsFrom);
  assert.equal(thin, direct);
  servedByAgent(lists);
  carriedByAgent(requests);
  return thin;
}

/**
 * Every one of these helper processes (their loaded modules) had its session served by the agent: the
 * Node helper's, which loaded no whole helper; the Perl helper's, which started no Node helper at all.
 */
function servedByAgent(lists: string[][]): void {
  if (perl()) {
    assert.deepEqual(lists, [], `${lists.length} Node helper processes ran beside the Perl helper`);
    return;
  }
  assert.ok(lists.length > 0, 'no helper process ran');
  const whole = lists.filter((modules) => modules.some((m) => m.endsWith('git-remote-knotless-main.cjs')));
  assert.equal(whole.length, 0, `${whole.length} of ${lists.length} helper processes ran without the agent`);
}

// One suite around the others: its `after` stops the agent before the file's own hooks close the
// network and its proxy (the agent holds connections to them, and would keep the file from ending).
describe('git-remote-knotless', () => {
  after(() => stopAgent());

  for (const thinHelper of THINS)
    describe(`the thin helper ${thinHelper.name}`, () => {
      before(() => (thinEnv = thinHelper.env));
      after(() => (thinEnv = {}));

      it('loads neither the helper bundle nor an atproto library (in Perl: no Node at all) when the agent runs, and the whole helper without it', async () => {
        const options = { NODE_OPTIONS: `--require ${probe}` };
        const thin = await loadedBy(() => transcript(warm, [['push', 'origin', 'main']], options));
        carriedByAgent(proxy().requests.slice(stepsFrom));
        if (perl()) assert.deepEqual(thin, [], 'a Node process ran for a push through the agent');
        else assert.ok(thin.length > 0, 'no helper process ran');
        for (const modules of thin) {
          assert.ok(
            modules.some((m) => m.endsWith('git-remote-knotless-thin-main.cjs')),
            modules.join('\n'),
          );
          assert.deepEqual(
            modules.filter((m) => /git-remote-knotless-main\.cjs$|@atproto|vendor/.test(m)),
            [],
          );
        }
        const direct = await loadedBy(() => transcript(plain, [['push', 'origin', 'main']], options));
        assert.ok(direct.length > 0, 'no helper process ran');
        for (const modules of direct)
          assert.ok(
            modules.some((m) => m.endsWith('git-remote-knotless-main.cjs')),
            modules.join('\n'),
          );
      });

      it('says what the direct helper says: a push, a change, a fetch and a clone', async () => {
        const out = await same([
          ['push', 'origin', 'main'],
          ['commit', '-q', '--allow-empty', '-m', 'two'],
          ['push', '-v', 'origin', 'main'],
          ['fetch', 'origin'],
          ['clone', '-q', 'URL', 'copy'],
        ]);
        assert.match(out, /\$ push origin main -> 0/);
      });

      it('says what the direct helper says when a push is rejected, by git or by the helper', async () => {
        const out = await same([
          ['commit', '-q', '--allow-empty', '-m', 'two'],
          ['push', 'origin', 'main'],
          ['reset', '-q', '--hard', 'HEAD~1'],
          ['commit', '-q', '--allow-empty', '-m', 'three'],
          ['push', 'origin', 'main'],
          ['push', '--force-with-lease=main:HEAD', 'origin', 'main'],
          ['push', 'origin', 'HEAD:refs/heads/main/inside'],
        ]);
        assert.match(out, /\(fetch first\)|\(non-fast-forward\)/);
        assert.match(out, /\(stale info\)/);
        assert.match(out, /main\/inside -> 1/);
      });

      it('says what the direct helper says to options it refuses, with the same exit status', async () => {
        const out = await same([
          ['push', '--signed', 'origin', 'main'],
          ['push', '--push-option=x', 'origin', 'main'],
          ['push', '--signed=if-asked', 'origin', 'main'],
          ['fetch', '--depth', '1', 'origin'],
          ['fetch', '--filter=blob:none', 'origin'],
        ]);
        assert.match(out, /does not support signed pushes/);
        // Shallow and partial fetches are served (git-parity-shallow.test.ts), the same both ways.
        assert.match(out, /fetch --depth 1 origin -> 0/);
      });

      it('exits as the direct helper does when it is run wrongly', async () => {
        const results = [];
        for (const user of [plain, warm]) {
          await ready(user);
          const dir = user.dir();
          // Through a shell alias: the helper gets the user's whole environment, as from git.
          let noUrl!: Awaited<ReturnType<GitUser['git']>>;
          const lists = await loadedBy(async () => {
            noUrl = await withEnv(user, { ...thinEnv, NODE_OPTIONS: `--require ${probe}` }, () =>
              user.git(dir, '-c', 'alias.h=!git-remote-knotless', 'h'),
            );
          });
          // Without a URL the thin helper hands its session to the agent too, which says the sentence.
          if (user === warm) servedByAgent(lists);
          const nested = await withEnv(user, thinEnv, () =>
            user.git(
              dir,
              '-c',
              'alias.h=!KNOTLESS_NESTED=1 git-remote-knotless origin knotless://alice.test/x',
              'h',
            ),
          );
          results.push([noUrl, nested].map((r) => `${r.code}\n${r.stdout}--\n${r.stderr}`).join('\n'));
        }
        assert.equal(results[1], results[0]);
        assert.match(results[0]!, /^2\n--\nknotless: git-remote-knotless is run by git/);
      });

      it('goes on directly when the agent dies in the middle of a clone or a push', async () => {
        await ready(plain);
        const name = `thin-crash-${++n}`;
        assert.equal((await plain.knotless('repo', 'create', name)).code, 0);
        const url = `knotless://alice.test/${name}`;
        const dir = plain.dir();
        await plain.ok(dir, 'init', '-q');
        await plain.ok(dir, 'remote', 'add', 'origin', url);
        const head = await commitFiles(plain, dir, { a: '1\n' }, 'one');
        await plain.ok(dir, 'push', '-q', 'origin', 'main');

        /**
         * Runs git as `crashy` with an agent that dies at `point`; its result once the agent is dead. The
         * session went on in one Node helper process: the Node thin helper itself, or the one the Perl
         * helper handed what it had read of git to (`replay`).
         */
        const dying = async (point: string, cwd: string, ...args: string[]) => {
          crashSocket = path.join(t.tmpdir(), 'crash.sock');
          const agent = await spawnAgent(crashSocket, { ...crashy.env, KNOTLESS_CRASH_AT: point });
          const gone = new Promise((r) => agent.child.once('exit', r));
          let res!: Awaited<ReturnType<GitUser['git']>>;
          const helpers = await probed(async () => {
            res = await withEnv(crashy, { NODE_OPTIONS: `--require ${probe}` }, () =>
              crashy.git(cwd, ...args),
            );
          });
          // An agent that never reached the point is stopped here (it would otherwise be waited for
          // until the test's own limit); one that died there (SIGKILL) ignores the signal.
          agent.child.kill('SIGTERM');
          await gone;
          assert.equal(
            agent.child.signalCode,
            'SIGKILL',
            `the agent did not die at ${point}\n${agent.log()}`,
          );
          assert.equal(helpers.length, 1, `${helpers.length} Node helper processes`);
          if (perl()) assert.match(helpers[0]!.h ?? '', /^replay \d+ \d+$/);
          else assert.equal(helpers[0]!.h, undefined);
          return res;
        };
        // Killed after the clone's pack is indexed, before its answer: the clone goes on here.
        const out = crashy.dir();
        const clone = await dying('fetch:pack-indexed', out, 'clone', '-q', url, 'c');
        assert.equal(clone.code, 0, clone.stderr);
        assert.equal(clone.stderr, '');
        const work = path.join(out, 'c');
        assert.equal((await crashy.ok(work, 'rev-parse', 'HEAD')).trim(), head);

        // Killed with the pack built, nothing written: the push goes on here and lands.
        const two = await commitFiles(crashy, work, { b: '2\n' }, 'two');
        const push = await dying('push:pack-built', work, 'push', '-q', 'origin', 'main');
        assert.equal(push.code, 0, push.stderr);
        assert.equal(push.stderr, '');
        assert.match(await plain.ok(dir, 'ls-remote', url), new RegExp(`^${two}\trefs/heads/main$`, 'm'));

        // Killed just after its write landed: the push going on here finds it landed, and says so.
        const three = await commitFiles(crashy, work, { c: '3\n' }, 'three');
        const landed = await dying('push:after-record-write', work, 'push', '-q', 'origin', 'main');
        assert.equal(landed.code, 0, landed.stderr);
        assert.equal(landed.stderr, '');
        assert.match(await plain.ok(dir, 'ls-remote', url), new RegExp(`^${three}\trefs/heads/main$`, 'm'));
      });

      it("asks the agent nothing over its socket but the session: the hosted helper's requests are calls", async () => {
        // The agent listens at its own socket; git's helpers reach it through a relay that notes each
        // HTTP request it carries. A helper hosted in the agent that asked it for its view, sent its
        // writes or said what it wrote over a socket would find the relay too (its session's environment
        // names it).
        const own = path.join(t.tmpdir(), 'own.sock');
        const agent = await spawnAgent(own, { ...crashy.env, KNOTLESS_AGENT_SOCKET: own });
        const seen: string[] = [];
        const relay = net.createServer((client) => {
          const up = net.connect(own);
          let head = '';
          client.on('data', (d: Buffer) => {
            head += d.toString('latin1');
            for (let m; (m = /^(GET|POST) (\S+) HTTP\/1\.1\r\n/m.exec(head)) !== null;) {
              seen.push(`${m[1]} ${new URL(m[2]!, 'http://agent').pathname}`);
              head = head.slice(m.index + m[0].length);
            }
          });
          client.pipe(up).pipe(client);
          client.on('error', () => up.destroy());
          up.on('error', () => client.destroy());
        });
        crashSocket = path.join(t.tmpdir(), 'relay.sock');
        await new Promise<void>((resolve) => relay.listen(crashSocket, resolve));
        try {
          const name = `thin-calls-${++n}`;
          assert.equal((await crashy.knotless('repo', 'create', name)).code, 0);
          const dir = await newRepo(crashy, `knotless://alice.test/${name}`);
          // The first push starts the agent's view of the repository; the second finds it warm.
          for (const file of ['a', 'b']) {
            await commitFiles(crashy, dir, { [file]: `${file}\n` }, file);
            seen.length = 0;
            const res = await crashy.git(dir, 'push', '-q', 'origin', 'main');
            assert.equal(res.code, 0, res.stderr);
            assert.equal(res.stderr, '');
            assert.deepEqual(seen, ['POST /helper']);
          }
        } finally {
          await new Promise((r) => relay.close(r));
          await agent.stop();
        }
      });

      it('ends the session at once and sends nothing more when git is interrupted mid-push (Ctrl-C), as the helper process would have died', async () => {
        // A pack too large to go in the record is uploaded first; the proxy holds that upload, so that
        // git can be interrupted while the agent pushes, before the record is written.
        const proxy = await startProxy({ target: t.net.pdsUrl });
        const own = path.join(t.tmpdir(), 'own.sock');
        const via = { KNOTLESS_SERVICE: proxy.url, KNOTLESS_AGENT_SOCKET: own };
        const agent = await spawnAgent(own, { ...crashy.env, ...via });
        crashSocket = own;
        let release = (): void => {};
        // Waits for `done`, looking at most 2400 times (two minutes and more): a guard against a hang
        // that fails saying what never happened, not a speed claim.
        const until = async (what: string, done: () => boolean | Promise<boolean>): Promise<void> => {
          for (let i = 0; !(await done()); i++) {
            if (i === 2400) assert.fail(`never saw ${what}\n${agent.log()}`);
            await new Promise((r) => setTimeout(r, 50));
          }
        };
        try {
          await withEnv(crashy, via, async () => {
            const name = `thin-interrupted-${++n}`;
            const url = `knotless://alice.test/${name}`;
            assert.equal((await crashy.knotless('repo', 'create', name)).code, 0);
            const dir = await newRepo(crashy, url);
            const one = await commitFiles(crashy, dir, { a: '1\n' }, 'one');
            await crashy.ok(dir, 'push', '-q', 'origin', 'main');
            const big = crypto.randomBytes(96 * 1024).toString('base64');
            const two = await commitFiles(crashy, dir, { big }, 'two');
            const remoteAt = async () =>
              (await crashy.ok(dir, 'ls-remote', url, 'refs/heads/main')).split('\t')[0];

            /** Interrupts `git push` while the proxy holds its `held` request; the session's exit status. */
            const interrupted = async (held: string): Promise<number> => {
              const hangUps = (): number => agent.log().match(/went away mid-session/g)?.length ?? 0;
              const ends = (): string[] =>
                [...agent.log().matchAll(/the helper that went away ended \(status (\d+)\)/g)].map(
                  (m) => m[1]!,
                );
              const [before, ended] = [hangUps(), ends().length];
              proxy.reset();
              proxy.inject({
                nsid: held,
                fault: { kind: 'hold', until: new Promise<void>((r) => (release = r)) },
              });
              // git and its thin helper in a process group of their own, as a shell runs a command.
              const push = spawn('git', ['push', '-q', 'origin', 'main'], {
                cwd: dir,
                env: { ...crashy.env, ...thinEnv },
                detached: true,
                stdio: 'ignore',
              });
              const exited = new Promise<unknown>((r) =>
                push.once('exit', (code, signal) => r(signal ?? code)),
              );
              await until(
                `the push's ${held} or its end`,
                () => proxy.count(held) > 0 || push.exitCode !== null,
              );
              assert.equal(push.exitCode, null, `the push ended before its ${held}`);
              process.kill(-push.pid!, 'SIGINT');
              assert.equal(await exited, 'SIGINT');
              await until('the agent note that git went away', () => hangUps() > before);
              // Ends at once, while its request is still held: nobody waits for it any more.
              await until('the agent note that the session ended', () => ends().length > ended);
              release();
              proxy.clearFaults();
              return Number(ends().at(-1));
            };

            // Held as the pack is uploaded, before the record's write: nothing is written.
            const status = await interrupted('com.atproto.repo.uploadBlob');
            assert.equal(await remoteAt(), one, 'the interrupted push was written');
            assert.equal(
              proxy.count('com.atproto.repo.putRecord') + proxy.count('com.atproto.repo.applyWrites'),
              0,
            );
            // Its failure is said in git's protocol, to nobody; the session itself ends without a fault.
            assert.notEqual(status, 70, 'the session ended with an internal error');

            // The agent goes on serving: the push again, uninterrupted, lands.
            const again = await crashy.git(dir, 'push', '-q', 'origin', 'main');
            assert.equal(again.code, 0, again.stderr);
            assert.equal(await remoteAt(), two);

            // Held as the record is written: sent before git went away, the write lands, and what is left
            // of the session (git's stdin, at its end) ends without a fault of its own.
            const three = await commitFiles(crashy, dir, { c: '3\n' }, 'three');
            const landed = await interrupted('com.atproto.repo.putRecord');
            // The write it had sent goes on to its end as the agent's own work, after the session ended.
            await until('the interrupted write landing', async () => (await remoteAt()) === three);
            assert.notEqual(landed, 70, 'the session ended with an internal error');
          });
        } finally {
          release();
          await agent.stop();
          await proxy.close();
        }
      });

      it('runs the whole helper when the agent refuses the session, before reading anything of git', async () => {
        // An agent that is going away: it takes its socket down and refuses the session it was handed.
        crashSocket = path.join(t.tmpdir(), 'none.sock');
        const asked: string[] = [];
        const server = http.createServer((req, res) => {
          asked.push(`${req.method} ${req.url}`);
          server.close();
          req.resume();
          res.writeHead(503).end('stopping');
        });
        const direct = await transcript(plain, [['push', 'origin', 'main']]);
        // Listening only once the repository is made (the CLI would send its requests to it too).
        let refused = '';
        const helpers = await probed(async () => {
          refused = await transcript(
            crashy,
            [['push', 'origin', 'main']],
            { NODE_OPTIONS: `--require ${probe}` },
            async () => {
              crashSocket = path.join(t.tmpdir(), 'refusing.sock');
              await new Promise<void>((resolve) => server.listen(crashSocket, resolve));
            },
          );
        });
        assert.deepEqual(asked, ['POST /helper']);
        // The Perl helper hands the session to the Node one, which runs it whole without asking again.
        assert.deepEqual(
          helpers.map((h) => h.h),
          [perl() ? 'direct' : undefined],
        );
        assert.equal(refused, direct);
        assert.match(refused, /-> 0\n--\nTo URL\n \* \[new branch\]/);
      });

      // Without the helper's deadline git waits for ever: the test's own limit turns that into a failure.
      it(
        'runs the whole helper when the agent takes the session but never answers',
        { timeout: 300_000 },
        async () => {
          // An agent that got stuck as it took a session: it never answers, and takes no other connection
          // (the whole helper, run here, would ask it too). git must not hang.
          crashSocket = path.join(t.tmpdir(), 'none.sock');
          const asked: string[] = [];
          const held: http.ServerResponse[] = [];
          const server = http.createServer((req, res) => {
            asked.push(`${req.method} ${req.url}`);
            server.close();
            held.push(res);
          });
          const direct = await transcript(plain, [['push', 'origin', 'main']]);
          let stuck = '';
          const helpers = await probed(async () => {
            stuck = await transcript(
              crashy,
              [['push', 'origin', 'main']],
              { NODE_OPTIONS: `--require ${probe}` },
              async () => {
                crashSocket = path.join(t.tmpdir(), 'stuck.sock');
                await new Promise<void>((resolve) => server.listen(crashSocket, resolve));
              },
            );
          });
          for (const res of held) res.destroy();
          assert.deepEqual(asked, ['POST /helper']);
          assert.deepEqual(
            helpers.map((h) => h.h),
            [perl() ? 'direct' : undefined],
          );
          assert.equal(stuck, direct);
        },
      );
    });

  describe('the command git runs (git-remote-knotless)', () => {
    it('runs the Node thin helper where perl is not on PATH, and where KNOTLESS_THIN=node', async () => {
      const steps = [['push', 'origin', 'main']];
      const direct = await transcript(plain, steps);
      const noPerl = withoutPerl(warm.env['PATH']!);
      const nowhere = await runProcess('sh', ['-c', 'command -v perl || echo none'], {
        env: { PATH: noPerl },
      });
      assert.equal(nowhere.stdout, 'none\n');
      for (const env of [{ PATH: noPerl }, { KNOTLESS_THIN: 'node' }]) {
        let thin = '';
        const helpers = await probed(async () => {
          thin = await transcript(warm, steps, { ...env, NODE_OPTIONS: `--require ${probe}` });
        });
        carriedByAgent(proxy().requests.slice(stepsFrom));
        assert.equal(thin, direct);
        // Node thin helpers, started by the command itself (no handoff from a Perl helper), that ran
        // no whole helper: the agent served them.
        assert.ok(helpers.length > 0, 'no Node helper process ran');
        for (const h of helpers) {
          assert.equal(h.h, undefined);
          assert.ok(h.m.some((m) => m.endsWith('git-remote-knotless-thin-main.cjs')));
          assert.ok(!h.m.some((m) => m.endsWith('git-remote-knotless-main.cjs')));
        }
      }
    });
  });
});

/**
 * `PATH` with every folder holding a `perl` replaced by a copy of it (links to its files) without one:
 * a machine without Perl, as the install check's.
 */
function withoutPerl(PATH: string): string {
  return PATH.split(':')
    .map((dir) => {
      if (!fs.existsSync(path.join(dir, 'perl'))) return dir;
      const copy = t.tmpdir();
      for (const name of fs.readdirSync(dir))
        if (!name.startsWith('perl')) fs.symlinkSync(path.join(dir, name), path.join(copy, name));
      return copy;
    })
    .join(':');
}
