import { spawn } from 'node:child_process';

/**
 * One Kafka-protocol broker for the run: librdkafka's mock cluster, which kcat starts when asked
 * for `test.mock.num.brokers` (it prints the address on stderr with `-d mock`). kcat itself
 * consumes a keep-alive topic meanwhile. The mock creates topics on first use, with 4 partitions.
 */
export async function startMockKafka(): Promise<{ brokers: string; stop(): Promise<void> }> {
  const child = spawn('kcat', ['-b', 'localhost:9092', '-X', 'test.mock.num.brokers=1', '-d', 'mock', '-C', '-t', 'tracking-test-keepalive', '-q'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const brokers = await new Promise<string>((resolve, reject) => {
    let seen = '';
    let found = false;
    const timer = setTimeout(() => reject(new Error('kcat did not print the mock broker address in time')), 15_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`kcat could not start (is it installed? .ci/run installs it): ${error.message}`));
    });
    child.stderr.on('data', (chunk: Buffer) => {
      // Keep reading its debug output, or kcat blocks on a full pipe.
      if (found) return;
      seen += chunk.toString();
      const match = /bootstrap\.servers=(\S+)/.exec(seen);
      if (match) {
        clearTimeout(timer);
        found = true;
        resolve(match[1]!);
      } else if (seen.length > 1_000_000) seen = seen.slice(-10_000);
    });
  });
  return {
    brokers,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
    },
  };
}
