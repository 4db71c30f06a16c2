// Preloaded into the service (`node --import <this file>`) by measure.ts: counts every function
// call from the start, and on SIGUSR2 writes the calls since the previous signal to
// `$WALK_PROBE_OUT.<n>.json` (V8's precise coverage resets its counters on each take).
import fs from 'node:fs';
import inspector from 'node:inspector';

const session = new inspector.Session();
session.connect();
const post = (method, params) =>
  new Promise((resolve, reject) => session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))));
await post('Profiler.enable');
await post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });

let taken = 0;
process.on('SIGUSR2', () => {
  void post('Profiler.takePreciseCoverage').then(({ result }) => {
    const called = result
      .filter((script) => script.url.startsWith('file:') && !script.url.includes('/node_modules/'))
      .map((script) => ({
        url: script.url,
        functions: script.functions.filter((f) => f.ranges[0].startOffset > 0 && f.ranges[0].count > 0).map((f) => `${f.functionName}@${f.ranges[0].startOffset}`),
      }))
      .filter((script) => script.functions.length > 0);
    fs.writeFileSync(`${process.env.WALK_PROBE_OUT}.${taken++}.json`, JSON.stringify(called));
  });
});
