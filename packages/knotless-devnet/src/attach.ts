import path from 'node:path';
import { NetworkError, pdsDir, readState, runningPid, type NetworkPds } from './network.ts';
import { pdsPlace } from './pds.ts';

/** A network another process runs, as its directory describes it. */
export interface AttachedNetwork {
  dir: string;
  plcUrl: string;
  pdses: NetworkPds[];
}

/**
 * The network running in `dir` (started by `knotless dev --dir DIR`, or a test's), for commands that
 * act on it from another process: its PLC and PDSes, from the state the directory keeps.
 */
export function attachNetwork(dir: string): AttachedNetwork {
  const state = readState(path.join(dir, 'network.json'));
  if (state === undefined || runningPid(dir) === undefined) {
    throw new NetworkError(
      `No network is running in ${dir}; start it with \`knotless dev --dir ${dir}\` first.`,
    );
  }
  return {
    dir,
    plcUrl: `http://localhost:${state.plcPort}`,
    pdses: state.pdses.map((p, i) => ({
      ...pdsPlace(p.port, pdsDir(dir, i)),
      adminPassword: p.secrets.adminPassword,
    })),
  };
}
