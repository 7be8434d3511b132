// Imported first by the CLI's entry, so that it runs before any module (or Node itself) can read
// process.stdout/stderr (see stdio.ts).
import { keepInheritedStdio } from './stdio.ts';
import { printWarningsPlainly } from './warnings.ts';

keepInheritedStdio(1);
printWarningsPlainly();
