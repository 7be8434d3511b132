// One https GET with the helper's client (xrpc/http1.ts), then exit: bundled and run by tls-start.ts.
import { Http1Pool } from '../../packages/knotless-core/src/xrpc/http1.ts';

const fs = process.getBuiltinModule('node:fs');
const port = Number(process.env['TLS_START_PORT']);
const pool = new Http1Pool({ ca: [fs.readFileSync(process.env['TLS_START_CA']!, 'utf8')] });
void pool
  .request(
    { kind: 'tcp', host: '127.0.0.1', port, secure: true },
    { method: 'GET', target: '/xrpc/_health', headers: { host: `127.0.0.1:${port}` }, body: null },
  )
  .then((res) => {
    const cpu = process.cpuUsage();
    const ms = Math.round(process.uptime() * 1000);
    process.stderr.write(
      `status ${res.status} done at ${ms}ms cpu ${Math.round((cpu.user + cpu.system) / 1000)}ms\n`,
    );
    process.exit(0);
  });
