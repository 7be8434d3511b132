// `knotless dev`'s program (the knotless CLI runs it; it can be run alone too): a local network, from
// the TypeScript sources on the workspace's Node 22, which the PDS needs.
import { devMain } from '../dev/dev.ts';

await devMain(process.argv.slice(2));
