// A node:test reporter that writes one line: the run's final counts as JSON (the `test:summary`
// event without a file is the whole run's). scripts/test.ts reads it to decide the exit code.
import type { TestEvent } from 'node:test/reporters';

export default async function* summary(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  for await (const event of source)
    if (event.type === 'test:summary' && event.data.file === undefined)
      yield `${JSON.stringify(event.data.counts)}\n`;
}
