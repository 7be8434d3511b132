// The libraries the agent's event stream uses, and only the parts it uses: the build bundles this
// module alone into dist/vendor/agent-stream.cjs, tree-shaken (scripts/build.ts), loaded when the
// agent first follows a PDS. Imported whole, @atproto/sync and @atproto/xrpc-server (a firehose
// runner, an XRPC server with express, lexicons) and the rest cost the agent about 50 MiB of memory
// for the names below; this way about 17 (performance.md, "Memory as the pack grows").
export { IdResolver, MemoryCache } from '@atproto/identity';
export { MST, MemoryBlockstore, readCarWithRoot } from '@atproto/repo';
export { websocket } from '@atproto/ws-client';
export { ensureChunkIsMessage } from '@atproto/xrpc-server';
