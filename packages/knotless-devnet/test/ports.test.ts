// A port asked of the kernel is free only until someone binds it: a parallel test or an outgoing
// connection may take it before the dev network's servers listen. A temporary network starts again
// on new ports; a kept one says which port was taken; a PDS that could not listen leaves nothing
// running (its databases and timers would keep the process alive after the caller gave up).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { PortTaken, startNetwork, whilePortTaken } from '../src/network.ts';

const SRC = path.join(import.meta.dirname, '..', 'src');

/** Holds a port on loopback until closed. */
async function hold(port = 0): Promise<{ port: number; close: () => Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const address = server.address() as net.AddressInfo;
  return { port: address.port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('ports of the dev network', () => {
  it('starts again while a port was taken, and gives up after the attempts it was given', async () => {
    let calls = 0;
    const started = await whilePortTaken(5, () => {
      calls++;
      return calls < 3 ? Promise.reject(new PortTaken(4000 + calls, '/tmp/x')) : Promise.resolve('up');
    });
    assert.deepEqual([started, calls], ['up', 3]);

    calls = 0;
    await assert.rejects(
      whilePortTaken(4, () => {
        calls++;
        return Promise.reject(new PortTaken(4000, '/tmp/x'));
      }),
      PortTaken,
    );
    assert.equal(calls, 4);

    // Any other failure is the caller's at once.
    calls = 0;
    await assert.rejects(
      whilePortTaken(5, () => {
        calls++;
        return Promise.reject(new Error('the PDS failed'));
      }),
      /the PDS failed/,
    );
    assert.equal(calls, 1);
  });

  it('a kept network whose port another program took says which, and starts once it is free', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-ports-'));
    try {
      const first = await startNetwork({ dir });
      const port = Number(new URL(first.pdsUrl).port);
      await first.close();
      const squatter = await hold(port);
      try {
        await assert.rejects(startNetwork({ dir }), (err: Error) => {
          assert.ok(err instanceof PortTaken);
          assert.equal(
            err.message,
            `Port ${port}, which this network's DIDs name, is in use by another program; free it, or remove ${dir} to start afresh.`,
          );
          return true;
        });
      } finally {
        await squatter.close();
      }
      const again = await startNetwork({ dir });
      assert.equal(again.pdsUrl, first.pdsUrl);
      await again.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a PDS that cannot listen fails with the port taken and leaves nothing running', async () => {
    // In a child process, which must end by itself once the failure is caught: anything the PDS left
    // open (its databases, its sequencer's timers) would keep it alive.
    const squatter = await hold();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-ports-'));
    const script = `import { Secp256k1Keypair } from '@atproto/crypto';
import { startPds } from '${pathToFileURL(path.join(SRC, 'pds.ts')).href}';
const rotation = await Secp256k1Keypair.create({ exportable: true });
const recovery = await Secp256k1Keypair.create();
try {
  await startPds({
    port: ${squatter.port},
    dir: ${JSON.stringify(dir)},
    plcUrl: 'http://127.0.0.1:9',
    secrets: {
      jwtSecret: 'a'.repeat(64),
      adminPassword: 'admin',
      plcRotationKeyHex: Buffer.from(await rotation.export()).toString('hex'),
      recoveryDidKey: recovery.did(),
    },
  });
  console.log('listening');
} catch (err) {
  console.log(err.code);
}`;
    try {
      const proc = spawn(
        process.execPath,
        ['--conditions=development', '--input-type=module', '-e', script],
        { cwd: path.join(SRC, '..'), stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let out = '';
      proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      const code = await new Promise<number | null>((resolve) => proc.on('close', resolve));
      assert.deepEqual([code, out.trim()], [0, 'EADDRINUSE']);
    } finally {
      await squatter.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
