// Imported first by the helper's entry, so that it runs before any module (or Node itself) can read
// process.stdout/stderr: the helper's stdout belongs to git, a stray write goes to stderr.
import { keepInheritedStdio } from './stdio.ts';
import { printWarningsPlainly } from './warnings.ts';

keepInheritedStdio(2);
printWarningsPlainly();
