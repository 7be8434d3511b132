import { printErr } from 'knotless-core/text/terminal';

/**
 * Node prints its own warnings (deprecations and the like) through console.error, which makes a
 * stream on stderr: one warning would turn git's shared pipe non-blocking (see knotless-core's
 * text/fd-io.ts). They are printed here instead, as plain writes.
 */
export function printWarningsPlainly(): void {
  process.removeAllListeners('warning');
  process.on('warning', (w) => printErr(`knotless: warning: ${w.name}: ${w.message}`));
}
