#!/usr/bin/env node
import { helperMain } from '../helper/main.ts';

process.exitCode = await helperMain(process.argv.slice(2));
