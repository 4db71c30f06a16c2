/**
 * HTTP read load in a worker thread (so that the load generator does not share an event loop
 * with a rebuild running in the main thread): `connections` loops of GET requests over `urls`,
 * round robin, until the main thread posts 'stop'; then posts back every latency in ms. Unlike
 * autocannon's workers, it can be stopped at a moment not known in advance and still report.
 * Plain JavaScript: worker threads do not load TypeScript through tsx on Node 20.
 */
import { parentPort, workerData } from 'node:worker_threads';

const { urls, token, connections } = workerData;
let stopping = false;
parentPort.on('message', (message) => {
  if (message === 'stop') stopping = true;
});

const latencies = [];
let failures = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: connections }, async (_, c) => {
    for (let i = c; !stopping; i += connections) {
      const t0 = performance.now();
      const response = await fetch(urls[i % urls.length], { headers: { authorization: `Bearer ${token}` } });
      await response.arrayBuffer();
      latencies.push(performance.now() - t0);
      if (response.status !== 200) failures++;
    }
  }),
);
parentPort.postMessage({ latencies, failures, seconds: (performance.now() - started) / 1000 });
