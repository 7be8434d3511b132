#!/usr/bin/env node
import { main } from '../cli/main.ts';
import { printWarningsPlainly } from './warnings.ts';

printWarningsPlainly();

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
