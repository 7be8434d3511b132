// A handle that DNS cannot be asked about is not a misspelt handle. The CLI and the helper run as
// users run them, with Node's resolver pointed (through a preloaded module, as /etc/resolv.conf
// would) at a DNS server on loopback that answers every question with one status: SERVFAIL (the
// resolver is broken), nothing at all (the resolver is gone) or NXDOMAIN (the name does not exist).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from 'knotless-devnet';
import { BIN_SCRIPTS } from '../src/paths.ts';
import { runProcess, type Run } from './helpers/cli.ts';
import { dnsServer, RCODE } from './helpers/dns-server.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-test-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The environment of a process whose resolver asks only `server`. */
function envWith(server: string): Record<string, string> {
  const preload = path.join(dir, `dns-${server.replace(/\W/g, '-')}.mjs`);
  fs.writeFileSync(preload, `import dns from 'node:dns';\ndns.setServers(['${server}']);\n`);
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: dir,
    KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
    KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
    KNOTLESS_AGENT: '0',
    NODE_OPTIONS: `--import=${preload}`,
  };
}

/** `knotless repo list HANDLE` and the helper's `list` for knotless://HANDLE/x, both as users run them. */
async function both(handle: string, env: Record<string, string>): Promise<{ cli: Run; helper: Run }> {
  const cli = await runProcess(process.execPath, [BIN_SCRIPTS['knotless']!, 'repo', 'list', handle], { env });
  const helper = await runProcess(
    process.execPath,
    [BIN_SCRIPTS['git-remote-knotless']!, 'origin', `knotless://${handle}/x`],
    { env, input: 'list\n' },
  );
  return { cli, helper };
}

// example.com's subdomains do not exist (RFC 2606), so no https answer can stand in for DNS's.
const HANDLE = 'alice.example.com';

describe('a handle when DNS fails', () => {
  let servfail = '';
  let nxdomain = '';
  let silent = '';
  before(async () => {
    servfail = await dnsServer(RCODE.SERVFAIL);
    nxdomain = await dnsServer(RCODE.NXDOMAIN);
    silent = `127.0.0.1:${await freePort()}`;
  });

  it('says the lookup failed and to try again, not to check the spelling (exit 8)', async () => {
    for (const server of [servfail, silent]) {
      const { cli, helper } = await both(HANDLE, envWith(server));
      for (const [who, res] of [
        ['cli', cli],
        ['helper', helper],
      ] as const) {
        assert.doesNotMatch(res.stderr, /spelling/, `${who} via ${server}`);
        assert.match(
          res.stderr,
          /Could not resolve the handle alice\.example\.com: the DNS lookup failed \((ESERVFAIL|ECONNREFUSED|ETIMEOUT)\), so whether it exists is unknown; check your network connection and try again\./,
          `${who} via ${server}: ${res.stderr}`,
        );
        assert.doesNotMatch(res.stderr, /\n\s+at /, `${who}: a stack`);
      }
      assert.equal(cli.code, 8, cli.stderr);
      assert.equal(helper.stdout, '', 'nothing on git’s channel');
    }
  });

  it('still says to check the spelling when DNS answers that the name does not exist (exit 3)', async () => {
    const { cli, helper } = await both(HANDLE, envWith(nxdomain));
    assert.equal(cli.code, 3, cli.stderr);
    assert.match(cli.stderr, /alice\.example\.com does not resolve to an account; check its spelling\./);
    assert.match(helper.stderr, /check its spelling/);
  });
});
