'use strict';
// libsodium's own module (the `libsodium` package libsodium-wrappers calls), handed its WebAssembly
// from dist/vendor/sodium.wasm through Emscripten's `instantiateWasm` setting, instead of decoding
// the base64 text it carries one byte at a time in JavaScript (some 7 ms of CPU in every process
// that loads it). The build writes sodium.wasm from that very text (scripts/build.ts), so the
// bytes are libsodium's own.
/* global WebAssembly */
const fs = require('node:fs');
const factory = require('libsodium-embedded').default;

module.exports = function sodiumModule(settings) {
  return factory({
    ...settings,
    instantiateWasm(imports, done) {
      // Synchronous: a missing or broken file then rejects libsodium's start-up (this runs inside
      // its promise), where an asynchronous failure would leave it waiting for ever.
      const bytes = fs.readFileSync(`${__dirname}/sodium.wasm`);
      done(new WebAssembly.Instance(new WebAssembly.Module(bytes), imports));
      return {};
    },
  });
};
