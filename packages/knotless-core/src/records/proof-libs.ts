// The libraries a getRecord proof is read with (records/proof.ts), and only the parts it uses: the
// build bundles this module alone into dist/vendor/proof.cjs, tree-shaken (scripts/build.ts), loaded
// by the first verified read. cborg is the CBOR codec @atproto/lex-cbor (atproto's own DAG-CBOR)
// is built on; multiformats reads the CIDs, the CAR's varints and the did:key's base58.
export { decode, encode, Token, Type } from 'cborg';
export { varint } from 'multiformats';
export { CID } from 'multiformats/cid';
export { base58btc } from 'multiformats/bases/base58';
