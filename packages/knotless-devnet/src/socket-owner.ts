import fs from 'node:fs/promises';

/**
 * Which of `pids` holds the client end of the loopback TCP connection from `clientPort` to
 * `serverPort`, read from Linux's /proc: the connection's socket inode from /proc/net/tcp{,6}, then
 * each process's open descriptors. Tests use it to prove which process sent a request (the agent,
 * not the helper), which no header can prove. Undefined when none of them holds it, or without /proc.
 */
export async function connectionOwner(
  clientPort: number,
  serverPort: number,
  pids: number[],
): Promise<number | undefined> {
  if (pids.length === 0) return undefined;
  const inode = await socketInode(clientPort, serverPort);
  if (inode === undefined) return undefined;
  const link = `socket:[${inode}]`;
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = await fs.readdir(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read: it holds nothing we can see
    }
    for (const fd of fds) {
      const target = await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => undefined);
      if (target === link) return pid;
    }
  }
  return undefined;
}

/** The inode of the socket whose local port is `local` and remote port `remote` (hex in /proc/net/tcp). */
async function socketInode(local: number, remote: number): Promise<string | undefined> {
  const hex = (port: number) => port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await fs.readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      if (cols[1]!.endsWith(`:${hex(local)}`) && cols[2]!.endsWith(`:${hex(remote)}`)) return cols[9];
    }
  }
  return undefined;
}
