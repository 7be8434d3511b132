// Identity attacks: an impostor's DID document claiming alice's handle, an identity cache
// poisoned by an older version, and one-off credentials that must not become the saved account.
import fs from 'node:fs';
import path from 'node:path';
import { knotless, runProcess } from '../helpers/cli.ts';
import { startImpostor, victimEnv } from '../helpers/impostor.ts';
import type { FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

/** Who `knotless repo info` says owns alice's repository, in words. */
async function aliceMeans(
  env: FaultEnv,
  user: Record<string, string>,
  name: string,
  impostor: string,
): Promise<string> {
  const res = await knotless(['repo', 'info', `alice.test/${name}`, '--json'], { env: user });
  if (res.code !== 0) return `repo info failed: ${res.stderr.trim()}`;
  const owner = (JSON.parse(res.stdout) as { owner: string }).owner;
  return owner === env.did
    ? 'alice.test still alice'
    : owner === impostor
      ? 'alice.test → impostor'
      : `alice.test → ${owner}`;
}

/** Every identity case. */
export const IDENTITY_CASES: FaultCase[] = [
  {
    group: 'hostile',
    name: 'an impostor DID claiming alice.test, touched once through git',
    expected: 'alice.test still alice; password not sent to the impostor; login at alice’s PDS',
    async run(env) {
      const { name } = await env.repo('ident');
      const impostor = await startImpostor(env.t.net.plcUrl, 'alice.test');
      try {
        const user = victimEnv(env.t);
        await runProcess('git', ['ls-remote', `knotless://${impostor.did}/x`], {
          env: user,
          cwd: user['HOME']!,
        });
        if (!impostor.methods().includes('com.atproto.repo.listRecords'))
          return 'the impostor was never touched';
        const means = await aliceMeans(env, user, name, impostor.did);
        const login = await knotless(['login', 'alice.test', '--app-password', env.t.password], {
          env: user,
        });
        const sent = impostor.requests.some(
          (r) => r.url.includes('createSession') || r.body.includes(env.t.password),
        );
        const at = login.code === 0 && login.stderr.includes(`(${env.did}) on ${env.t.net.pdsUrl}`);
        return `${means}; ${sent ? 'password SENT to the impostor' : 'password not sent to the impostor'}; ${at ? 'login at alice’s PDS' : `login: ${login.stderr.trim()}`}`;
      } finally {
        await impostor.close();
      }
    },
  },
  {
    group: 'hostile',
    name: 'an identity cache from an older version mapping alice.test to an impostor',
    expected: 'alice.test still alice',
    async run(env) {
      const { name } = await env.repo('ident-cache');
      const impostor = await startImpostor(env.t.net.plcUrl, 'alice.test');
      try {
        const user = victimEnv(env.t);
        const at = Date.now();
        const value = { did: impostor.did, handle: 'alice.test', pds: impostor.url };
        const old = {
          handles: { 'alice.test': { value: impostor.did, at } },
          dids: { [impostor.did]: { value, at } },
        };
        fs.mkdirSync(user['KNOTLESS_CACHE_DIR']!, { recursive: true });
        fs.writeFileSync(path.join(user['KNOTLESS_CACHE_DIR']!, 'identity.json'), JSON.stringify(old));
        return await aliceMeans(env, user, name, impostor.did);
      } finally {
        await impostor.close();
      }
    },
  },
  {
    group: 'hostile',
    name: 'one-off credentials (KNOTLESS_IDENTIFIER) in a logged-in shell',
    expected: 'acted as bob; whoami unchanged',
    async run(env) {
      await env.t.net.ensureAccount('bob.test', env.t.password);
      const user = env.t.env();
      const login = await knotless(['login', 'alice.test', '--app-password', env.t.password], { env: user });
      if (login.code !== 0) return `login failed: ${login.stderr.trim()}`;
      const bob = { ...user, KNOTLESS_IDENTIFIER: 'bob.test', KNOTLESS_PASSWORD: env.t.password };
      const made = await knotless(['repo', 'create', `one-off-${Date.now()}`], { env: bob });
      const acted =
        made.code === 0 && made.stdout.startsWith('knotless://bob.test/')
          ? 'acted as bob'
          : `create: ${made.stderr.trim()}`;
      const who = await knotless(['whoami'], { env: user });
      return `${acted}; ${who.stdout.startsWith(`alice.test (${env.did})`) ? 'whoami unchanged' : `whoami now: ${who.stdout.trim()}`}`;
    },
  },
];
