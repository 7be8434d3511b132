// One https GET with node:https (required on first use, keep-alive agent), then exit: bundled and run
// by tls-start.ts.
const fs = process.getBuiltinModule('node:fs');
const port = Number(process.env['TLS_START_PORT']);
const ca = [fs.readFileSync(process.env['TLS_START_CA']!, 'utf8')];
const https = process.getBuiltinModule('node:https');
const agent = new https.Agent({ keepAlive: true, ca });
https.get({ host: '127.0.0.1', port, path: '/xrpc/_health', agent }, (res) => {
  res.resume();
  res.on('end', () => {
    const cpu = process.cpuUsage();
    const ms = Math.round(process.uptime() * 1000);
    process.stderr.write(
      `status ${res.statusCode} done at ${ms}ms cpu ${Math.round((cpu.user + cpu.system) / 1000)}ms\n`,
    );
    process.exit(0);
  });
});
