#!/usr/bin/env node
import './cli-prelude.ts';
import { main } from '../cli/main.ts';

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
