// The appview's OAuth client metadata, as a PDS reads it: valid by @atproto/oauth-types, asking
// for knotless's collections and pack blobs only; a confidential client behind https with its
// JWKS (the public half of the server key, nothing private); sessions sealed at rest.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { oauthClientMetadataSchema } from '@atproto/oauth-types';
import { KNOTLESS_OAUTH_SCOPE } from 'knotless-core/forge/oauth-scope';
import { startAppview, type Appview } from '../src/appview.ts';
import { serverKeyOf } from '../src/auth/server-key.ts';
import { defaultConfig, type ServeConfig } from '../src/config.ts';

const apps: Appview[] = [];
after(() => Promise.all(apps.map((a) => a.close())));

/** An appview that follows nothing: only its own pages are asked for. */
async function appview(extra: Partial<ServeConfig>): Promise<Appview> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-meta-'));
  const app = await startAppview(
    { ...defaultConfig(dir), database: ':memory:', port: 0, ...extra },
    () => {},
  );
  apps.push(app);
  return app;
}

function checkScopes(scope: string | undefined): void {
  assert.equal(scope, KNOTLESS_OAUTH_SCOPE);
  for (const s of scope.split(' '))
    assert.match(s, /^(atproto|repo:dev\.knotless\.[a-z.]+|blob:application\/x-git-packed-objects)$/, s);
}

function keyFile(): string {
  const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-key-')), 'key.pem');
  fs.writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  return file;
}

describe('the OAuth client metadata', () => {
  it('on the dev network: the loopback client, valid, with knotless scopes only', async () => {
    const app = await appview({ dev: true });
    const res = await fetch(`${app.url}/oauth-client-metadata.json`);
    assert.equal(res.status, 200);
    const meta = oauthClientMetadataSchema.parse(await res.json());
    assert.match(meta.client_id!, /^http:\/\/localhost\?/);
    assert.deepEqual(meta.redirect_uris, [`${app.url}/oauth/callback`]);
    checkScopes(meta.scope);
    assert.equal((await fetch(`${app.url}/oauth/jwks.json`)).status, 404, 'a public client has no keys');
  });

  it('behind https: a confidential client whose JWKS is the public half of the server key', async () => {
    const file = keyFile();
    const app = await appview({ publicUrl: 'https://forge.example', oauthKeyFile: file });
    const meta = oauthClientMetadataSchema.parse(
      await (await fetch(`${app.url}/oauth-client-metadata.json`)).json(),
    );
    assert.equal(meta.client_id, 'https://forge.example/oauth-client-metadata.json');
    assert.deepEqual(meta.redirect_uris, ['https://forge.example/oauth/callback']);
    assert.equal(meta.token_endpoint_auth_method, 'private_key_jwt');
    assert.equal(meta.jwks_uri, 'https://forge.example/oauth/jwks.json');
    assert.equal(meta.dpop_bound_access_tokens, true);
    checkScopes(meta.scope);
    const jwks = (await (await fetch(`${app.url}/oauth/jwks.json`)).json()) as {
      keys: Record<string, unknown>[];
    };
    assert.equal(jwks.keys.length, 1);
    assert.equal(jwks.keys[0]!['kty'], 'EC');
    assert.equal(jwks.keys[0]!['d'], undefined, 'the private part is never served');
  });

  it('without a server key outside dev mode, offers no sign-in', async () => {
    const app = await appview({ publicUrl: 'https://forge.example' });
    assert.equal((await fetch(`${app.url}/oauth-client-metadata.json`)).status, 404);
    assert.equal((await fetch(`${app.url}/-/signin`)).status, 404);
    assert.doesNotMatch(await (await fetch(app.url)).text(), /Sign in/);
  });

  it('seals what it stores: bound to its row, and refused after any change', () => {
    const key = serverKeyOf(fs.readFileSync(keyFile(), 'utf8'), 'key');
    const sealed = key.seal('{"tokens":"secret"}', 'session:did:plc:a');
    assert.doesNotMatch(Buffer.from(sealed, 'base64').toString('latin1'), /secret/);
    assert.equal(key.open(sealed, 'session:did:plc:a'), '{"tokens":"secret"}');
    assert.throws(() => key.open(sealed, 'session:did:plc:b'), 'another row');
    const bytes = Buffer.from(sealed, 'base64');
    bytes[bytes.length - 1]! ^= 1;
    assert.throws(() => key.open(bytes.toString('base64'), 'session:did:plc:a'), 'a flipped bit');
    const other = serverKeyOf(fs.readFileSync(keyFile(), 'utf8'), 'other');
    assert.throws(() => other.open(sealed, 'session:did:plc:a'), 'another key');
  });
});
