#!/usr/bin/env node
import './helper-prelude.ts';
import { helperMain } from '../helper/main.ts';

// Exit explicitly: git may keep our stdin open after a failure, which would keep the process alive.
void helperMain(process.argv.slice(2)).then((code) => process.exit(code));
