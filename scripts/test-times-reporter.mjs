// A node --test reporter for scripts/test.mjs: each test file's seconds, as one JSON object by
// path, from the describe() named after the file that its group wraps it in. scripts/test.mjs
// balances the next run's groups by these times.
export default async function* fileTimes(source) {
  const times = {};
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (event.data.nesting === 0 && /^test\/.+\.test\.ts$/.test(event.data.name)) times[event.data.name] = event.data.details.duration_ms / 1000;
  }
  yield `${JSON.stringify(times)}\n`;
}
