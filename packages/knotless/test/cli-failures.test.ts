// Every failure a user can cause, through the CLI and through git, each checked the same way: one
// sentence of ours (what happened, what to do), the status from the one table, and nothing else:
// no stack trace, no `[object Object]`, no raw JSON, no doubled "error:". Faults come from the
// devnet proxy and from servers that refuse or never answer.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { freePort, startProxy, type FaultRule, type Proxy } from 'knotless-devnet';
import { EXIT_CODES } from 'knotless-core/exit-codes';
import { BIN_SCRIPTS } from '../src/paths.ts';
import { runProcess, type Run } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { noise } from './faults/checks.ts';

const t = useNetwork(['alice.test', 'bob.test']);
// Its repositories stay on ref records (KNOTLESS_REF_TABLE=0): the requests its cases script, hold
// or count are those of ref records.
t.defaults['KNOTLESS_REF_TABLE'] = '0';
let proxy: Proxy | undefined;
let silent: net.Server | undefined;
const held = new Set<net.Socket>();
let silentUrl = '';
let refusedUrl = '';
/** Extra environment for the next commands (a fault's KNOTLESS_SERVICE, say). */
let via: Record<string, string> = {};
const common = () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0', ...via });
const alice = useGitUser(t, 'alice.test', common);
const bob = useGitUser(t, 'bob.test', common);

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
  // A PDS that accepts connections and never answers a byte.
  silent = net.createServer((socket) => {
    held.add(socket);
    socket.on('close', () => held.delete(socket)).resume();
  });
  await new Promise<void>((resolve) => silent!.listen(0, '127.0.0.1', resolve));
  silentUrl = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
  refusedUrl = `http://127.0.0.1:${await freePort()}`;
});
after(async () => {
  await proxy?.close();
  for (const socket of held) socket.destroy();
  await new Promise((resolve) => silent?.close(resolve));
});

async function under<T>(
  env: Record<string, string>,
  rule: FaultRule | undefined,
  f: () => Promise<T>,
): Promise<T> {
  via = env;
  if (rule !== undefined) proxy!.inject(rule);
  try {
    return await f();
  } finally {
    via = {};
    proxy!.clearFaults();
  }
}

/** Our lines in a run's stderr. */
const ours = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('knotless: '));

/** The hygiene every failure's output keeps, whoever prints it. */
function assertClean(res: Run, what: string): void {
  const all = res.stdout + res.stderr;
  assert.doesNotMatch(all, /^\s+at .+[:(]\d+:\d+\)?$/m, `${what}: a stack trace`);
  assert.doesNotMatch(all, /\[object \w+\]|undefined|NaN/, `${what}: an unprinted value`);
  assert.doesNotMatch(all, /error: error:|knotless: knotless: |fatal: fatal:/i, `${what}: doubled prefix`);
  assert.doesNotMatch(all, /^\s*[[{]"|\{"error"|"message":/m, `${what}: raw JSON`);
  assert.doesNotMatch(all, /\b(TypeError|RangeError|SyntaxError|ReferenceError)\b/, `${what}: a bug`);
}

/** A failed CLI command: the status for `code`, stdout empty, one `knotless:` sentence matching `says`. */
function assertCliFailure(res: Run, code: keyof typeof EXIT_CODES, says: RegExp, what: string): void {
  assert.equal(res.code, EXIT_CODES[code], `${what}: ${res.stderr}`);
  assert.equal(res.stdout, '', `${what}: stdout`);
  const lines = res.stderr.split('\n').filter(Boolean);
  // `login` says where the password goes before it is sent; every other line is the one sentence.
  const sentence = lines.filter((l) => !l.startsWith('Logging in as '));
  assert.equal(sentence.length, 1, `${what}: one line: ${res.stderr}`);
  assert.match(sentence[0]!, /^knotless: \S.+[.)]$/, `${what}: a sentence`);
  assert.match(sentence[0]!, says, what);
  assertClean(res, what);
}

/** A failed git command: non-zero, exactly one sentence of ours matching `says`. */
function assertGitFailure(res: Run, says: RegExp, what: string): void {
  assert.notEqual(res.code, 0, `${what}: succeeded`);
  const lines = ours(res.stderr);
  assert.equal(lines.length, 1, `${what}: one sentence of ours: ${res.stderr}`);
  assert.match(lines[0]!, says, `${what}: ${res.stderr}`);
  assertClean(res, what);
}

let repo = '';
let dir = '';

describe('failures through the CLI', () => {
  before(async () => {
    await t.ready;
    repo = `fail-${Date.now()}`;
    assert.equal((await alice.knotless('repo', 'create', repo)).code, 0);
    dir = await newRepo(alice, `knotless://alice.test/${repo}`);
    await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    await commitFiles(alice, dir, { 'big.bin': noise(40_000, 7) }, 'two');
  });

  it('names what is wrong and what to do, with the status from the table', async () => {
    const fresh = t.env({ KNOTLESS_AGENT: '0' });
    const cases: Array<[string, string[], Record<string, string>, keyof typeof EXIT_CODES, RegExp]> = [
      [
        'unknown handle',
        ['repo', 'list', 'nobody.test'],
        {},
        'unknown-handle',
        /nobody\.test does not exist/,
      ],
      ['invalid handle', ['repo', 'list', 'a b'], {}, 'unknown-handle', /"a b" is not a valid handle/],
      [
        'unknown repository',
        ['repo', 'info', `alice.test/nope`],
        {},
        'repo-missing',
        /no repository named nope/,
      ],
      ['unknown repository, --json', ['repo', 'info', 'nope', '--json'], {}, 'repo-missing', /nope/],
      ['invalid name', ['repo', 'create', 'a b'], {}, 'invalid-name', /"a b" is not a valid repository name/],
      ['three-part name', ['repo', 'info', 'a/b/c'], {}, 'usage', /"a\/b\/c" is not a repository/],
      ['taken name', ['repo', 'create', repo], {}, 'repo-exists', new RegExp(repo)],
      [
        "someone else's repository: commit",
        ['repo', 'commit', `bob.test/${repo}`, '-m', 'x', '--delete', 'a'],
        {},
        'permission-denied',
        /Only bob\.test can/,
      ],
      [
        "someone else's repository: delete",
        ['repo', 'delete', `bob.test/${repo}`, '--yes'],
        {},
        'permission-denied',
        /only your own repositories/,
      ],
      [
        '--author not Name <email>',
        ['repo', 'commit', repo, '-m', 'x', '--author', 'bad', '--add', `b=${dir}/a.txt`],
        {},
        'usage',
        /--author "bad" is not of the form "Name <email>"\.$/,
      ],
      [
        'a branch git refuses',
        ['repo', 'commit', repo, '-m', 'x', '--branch', 'a..b', '--add', `b=${dir}/a.txt`],
        {},
        'usage',
        /"a\.\.b" is not a branch name git accepts/,
      ],
      [
        'an empty commit',
        ['repo', 'commit', repo, '-m', 'x', '--delete', 'not-there'],
        {},
        'usage',
        /Nothing to commit: .+ every --delete names a path it does not have\.$/,
      ],
      [
        'an unchanged file',
        ['repo', 'commit', repo, '-m', 'x', '--add', `a.txt=${dir}/a.txt`],
        {},
        'usage',
        /Nothing to commit/,
      ],
      [
        'KNOTLESS_SERVICE not a URL',
        ['repo', 'list'],
        { KNOTLESS_SERVICE: 'notaurl' },
        'usage',
        /KNOTLESS_SERVICE is "notaurl", which is not an http:\/\/ or https:\/\/ URL; fix it or unset it\.$/,
      ],
      [
        'KNOTLESS_APPVIEW not http',
        ['pr', 'list', repo],
        { KNOTLESS_APPVIEW: 'ftp://x' },
        'usage',
        /KNOTLESS_APPVIEW is "ftp:\/\/x"/,
      ],
      [
        'compact a ref not there',
        ['repo', 'compact', repo, '--ref', 'main'],
        {},
        'not-found',
        /has no ref main; name refs in full, e\.g\. refs\/heads\/main/,
      ],
      ['delete not confirmed', ['repo', 'delete', repo], {}, 'usage', /pass --yes/],
      [
        'PDS down',
        ['repo', 'list'],
        { KNOTLESS_SERVICE: refusedUrl, KNOTLESS_RETRIES: '0' },
        'pds-unreachable',
        /Could not reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/,
      ],
      [
        'PDS hangs',
        ['repo', 'list'],
        { KNOTLESS_SERVICE: silentUrl, KNOTLESS_HTTP_TIMEOUT: '2' },
        'pds-error',
        /within 2 s, so it was cut off; .+KNOTLESS_HTTP_TIMEOUT/,
      ],
      [
        'PLC down',
        ['repo', 'list', 'alice.test'],
        { KNOTLESS_PLC_URL: refusedUrl, KNOTLESS_IDENTITY_TTL: '0' },
        'pds-unreachable',
        /KNOTLESS_PLC_URL/,
      ],
    ];
    for (const [what, args, env, code, says] of cases) {
      const res = await under(env, undefined, () => alice.knotless(...args));
      assertCliFailure(res, code, says, what);
    }
    const notIn = await runProcess(process.execPath, [BIN_SCRIPTS['knotless']!, 'repo', 'create', 'x'], {
      env: fresh,
    });
    assertCliFailure(notIn, 'not-logged-in', /not logged in; run `knotless login <handle>`/, 'not logged in');
    const wrong = await runProcess(
      process.execPath,
      [BIN_SCRIPTS['knotless']!, 'login', 'alice.test', '--app-password', 'nope'],
      { env: fresh },
    );
    assertCliFailure(wrong, 'wrong-password', /refused the password for alice\.test/, 'wrong password');
    const wrongEnv = { ...fresh, KNOTLESS_IDENTIFIER: 'alice.test', KNOTLESS_PASSWORD: 'nope' };
    const oneOff = await runProcess(process.execPath, [BIN_SCRIPTS['knotless']!, 'repo', 'create', 'y'], {
      env: wrongEnv,
    });
    assertCliFailure(
      oneOff,
      'wrong-password',
      /refused the password for alice\.test/,
      'wrong KNOTLESS_PASSWORD',
    );
  });

  it('says until when the PDS rate-limits, from its 429 and ratelimit headers (exit 10)', async () => {
    const rule: FaultRule = {
      nsid: 'com.atproto.repo.listRecords',
      times: Infinity,
      fault: { kind: 'rate-limit', retryAfter: 3600 },
    };
    const res = await under({ KNOTLESS_SERVICE: proxy!.url }, rule, () => alice.knotless('repo', 'list'));
    assertCliFailure(
      res,
      'rate-limited',
      /rate-limiting .+ until \d{4}-\d\d-\d\dT[\d:.]+Z; try again then, in \d+ s\.$/,
      '429',
    );
  });
});

describe('failures through git and the helper', () => {
  it('refuses malformed URLs in one sentence, before any request', async () => {
    const bad = [
      'knotless://',
      'knotless://x',
      'knotless://alice.test',
      'knotless://alice.test/',
      'knotless://alice.test/a/b',
      'knotless://alice test/x',
      'knotless://alice.test/a b',
      'knotless://alice.test:80/x',
      'knotless://user@alice.test/x',
      'knotless://alice.test/x?y=1',
      'knotless://alice.test/x#y',
    ];
    proxy!.reset();
    for (const url of bad) {
      const res = await under({ KNOTLESS_SERVICE: proxy!.url }, undefined, () =>
        alice.git(alice.dir(), 'clone', url, 'c'),
      );
      assertGitFailure(res, /is not a (knotless URL|valid repository name)/, url);
    }
    assert.equal(proxy!.requests.length, 0);
  });

  it('says what is wrong for each failure a clone, fetch or push can meet', async () => {
    const url = `knotless://alice.test/${repo}`;
    const fresh = t.env({ KNOTLESS_AGENT: '0' });
    const cases: Array<[string, () => Promise<Run>, RegExp]> = [
      [
        'unknown handle',
        () => alice.git(alice.dir(), 'clone', `knotless://nobody.test/${repo}`, 'c'),
        /nobody\.test does not exist/,
      ],
      [
        'unknown repository',
        () => alice.git(alice.dir(), 'clone', 'knotless://alice.test/nope', 'c'),
        /alice\.test\/nope does not exist; create it/,
      ],
      [
        'upper case in the name',
        () => alice.git(alice.dir(), 'clone', `knotless://alice.test/${repo.toUpperCase()}`, 'c'),
        /does not exist/,
      ],
      [
        "someone else's repository",
        () => bob.git(dir, 'push', url, 'main:refs/heads/bob'),
        /permission denied: you are bob\.test, and only alice\.test can push/,
      ],
      [
        'not logged in',
        () =>
          runProcess('git', ['push', url, 'main:refs/heads/x'], {
            env: { ...alice.env, ...common(), KNOTLESS_CONFIG_DIR: fresh['KNOTLESS_CONFIG_DIR']! },
            cwd: dir,
          }),
        /You are not logged in/,
      ],
      [
        'wrong password',
        () =>
          runProcess('git', ['push', url, 'main:refs/heads/x'], {
            env: {
              ...alice.env,
              ...common(),
              KNOTLESS_CONFIG_DIR: fresh['KNOTLESS_CONFIG_DIR']!,
              KNOTLESS_IDENTIFIER: 'alice.test',
              KNOTLESS_PASSWORD: 'nope',
            },
            cwd: dir,
          }),
        /refused the password for alice\.test/,
      ],
    ];
    cases.push([
      'KNOTLESS_SERVICE not a URL',
      () => under({ KNOTLESS_SERVICE: 'notaurl' }, undefined, () => alice.git(dir, 'fetch', 'origin')),
      /KNOTLESS_SERVICE is "notaurl", which is not an http/,
    ]);
    for (const [what, f, says] of cases) assertGitFailure(await f(), says, what);
    // git's own refusal: its words and hints, no sentence of ours.
    // (main~1: the commit ahead, with its blob-sized pack, stays unpushed for the next test.)
    await alice.ok(dir, 'push', '-q', 'origin', 'main~1:refs/heads/side');
    const orphan = (await alice.ok(dir, 'commit-tree', '-m', 'orphan', 'main~1^{tree}')).trim();
    const nonFf = await alice.git(dir, 'push', 'origin', `${orphan}:refs/heads/side`);
    assert.notEqual(nonFf.code, 0);
    assert.match(nonFf.stderr, /! \[rejected\] +\S+ -> side \(non-fast-forward\)/);
    assert.deepEqual(ours(nonFf.stderr), []);
    assertClean(nonFf, 'non-fast-forward');
  });

  it('says the PDS is down, hangs, rate-limits or refuses a blob, and git names the reason per ref', async () => {
    const url = `knotless://alice.test/${repo}`;
    const down = { KNOTLESS_SERVICE: refusedUrl, KNOTLESS_RETRIES: '0' };
    const hang = { KNOTLESS_SERVICE: silentUrl, KNOTLESS_HTTP_TIMEOUT: '2' };
    const prox = { KNOTLESS_SERVICE: proxy!.url, KNOTLESS_RETRIES: '0' };
    const limited: FaultRule = {
      nsid: 'com.atproto.repo.listRecords',
      times: Infinity,
      fault: { kind: 'rate-limit', retryAfter: 3600 },
    };
    const clone = () => alice.git(alice.dir(), 'clone', url, 'c');
    const fetch = () => alice.git(dir, 'fetch', 'origin');
    const push = () => alice.git(dir, 'push', 'origin', 'main');
    for (const [what, f] of [
      ['clone', clone],
      ['fetch', fetch],
      ['push', push],
    ] as const) {
      assertGitFailure(
        await under(down, undefined, f),
        /Could not reach .+ \(ECONNREFUSED\); check your connection/,
        `${what}: PDS down`,
      );
      assertGitFailure(
        await under(hang, undefined, f),
        /within 2 s, so it was cut off/,
        `${what}: PDS hangs`,
      );
      assertGitFailure(
        await under(prox, limited, f),
        /rate-limiting .+ until \S+; try again then, in \d+ s\.$/,
        `${what}: 429`,
      );
    }
    // The pack (40 kB of noise) goes as a blob, and the PDS refuses it as too large.
    const tooBig: FaultRule = {
      nsid: 'com.atproto.repo.uploadBlob',
      times: Infinity,
      fault: { kind: 'status', status: 413, error: 'PayloadTooLarge', message: 'request entity too large' },
    };
    const big = await under(prox, tooBig, push);
    assertGitFailure(big, /too large/i, 'blob too large');
    assert.match(big.stderr, /! \[remote rejected\] +main -> main \(too large\)/);
    // A write the PDS rate-limits: git's reason for the ref is the code's, in words.
    const putLimited: FaultRule = {
      nsid: 'com.atproto.repo.putRecord',
      times: Infinity,
      fault: { kind: 'rate-limit', retryAfter: 3600 },
    };
    const put = await under(prox, putLimited, push);
    assertGitFailure(
      put,
      /rate-limiting writing the refs of alice\.test\/.+ until \S+; try again then, in \d+ s\.$/,
      'write 429',
    );
    assert.match(put.stderr, /! \[remote rejected\] +main -> main \(rate limited\)/);
  });

  it('writes nothing but the protocol on stdout, even when it fails', async () => {
    const helper = BIN_SCRIPTS['git-remote-knotless']!;
    const env = { ...alice.env, ...common(), GIT_DIR: `${dir}/.git` };
    const cases: Array<[string, string, keyof typeof EXIT_CODES]> = [
      ['knotless://alice.test', 'capabilities\n\n', 'invalid-url'],
      ['knotless://alice.test/nope', 'capabilities\nlist\n\n', 'repo-missing'],
      ['knotless://nobody.test/x', 'capabilities\nlist for-push\n\n', 'unknown-handle'],
    ];
    for (const [url, input, code] of cases) {
      const res = await runProcess(process.execPath, [helper, 'origin', url], { env, input });
      assert.equal(res.code, EXIT_CODES[code], `${url}: ${res.stderr}`);
      // Whatever it answered before failing is protocol: capability lines, or nothing.
      for (const line of res.stdout.split('\n').filter(Boolean))
        assert.match(
          line,
          /^(\*?[a-z-]+|option|fetch|push|refspec .+)$/,
          `${url}: stdout ${JSON.stringify(line)}`,
        );
      assert.equal(ours(res.stderr).length, 1, `${url}: ${res.stderr}`);
      assertClean(res, url);
    }
  });
});
