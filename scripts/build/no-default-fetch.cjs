'use strict';
// Stands in for @atproto-labs/fetch-node in knotless's and knotless-serve's bundles. Both always pass
// their own fetch (knotless's over its own transport, with its caps and trusted certificates; the
// appview's through its address guard) to the identity resolver and the event stream, so their
// default fetch is never used; the real module loads undici, which cannot even be loaded on Node 20
// and would add megabytes to every install.
function unavailable() {
  throw new Error('knotless: this build has no default fetch; pass one');
}
module.exports = { safeFetchWrap: unavailable, unicastLookup: unavailable };
