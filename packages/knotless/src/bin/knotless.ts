#!/usr/bin/env node
import './cli-prelude.ts';
import { hostHelpers } from '../agent/helper-host.ts';
import { main } from '../cli/main.ts';

// `knotless agent` runs thin helpers' sessions with the helper's own code, loaded on the first one.
hostHelpers(async (session) => {
  const [{ helperMain }, { CommandReader }] = await Promise.all([
    import('../helper/main.ts'),
    import('../helper/protocol.ts'),
  ]);
  return helperMain(session.argv, {
    reader: new CommandReader(session.read),
    answer: session.answer,
    write: session.write,
    env: session.env,
    hosted: session.agent,
  });
});

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
