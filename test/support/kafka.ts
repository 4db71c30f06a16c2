import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';
import { inject } from 'vitest';

/** The run's Kafka-protocol broker (global-setup), a topic per test, and a producer as gateways use. */

export function kafkaBrokers(): string {
  return inject('kafkaBrokers');
}

/** Fresh topic, dead-letter topic and group names for one test, as service environment. */
export function kafkaEnv(label: string): { KAFKA_BROKERS: string; KAFKA_SCAN_TOPIC: string; KAFKA_DLQ_TOPIC: string; KAFKA_GROUP_ID: string } {
  const id = `${label}-${randomUUID().slice(0, 8)}`;
  return { KAFKA_BROKERS: kafkaBrokers(), KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}` };
}

let kafka: Kafka | null = null;
function client(): Kafka {
  kafka ??= new Kafka({ clientId: 'test-gateway', brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  return kafka;
}

export async function gateway(): Promise<{ publish(topic: string, key: string, value: string | object): Promise<void>; close(): Promise<void> }> {
  const producer: Producer = client().producer({ allowAutoTopicCreation: true });
  await producer.connect();
  return {
    async publish(topic, key, value) {
      await producer.send({ topic, messages: [{ key, value: typeof value === 'string' ? value : JSON.stringify(value) }] });
    },
    close: () => producer.disconnect(),
  };
}

export interface DeadLetter {
  key: string | null;
  value: string | null;
  headers: Record<string, string>;
}

/** Reads the dead-letter topic from the start until `count` messages arrived (or the timeout). */
export async function readDeadLetters(topic: string, count: number, timeoutMs = 30_000): Promise<DeadLetter[]> {
  const consumer: Consumer = client().consumer({ groupId: `dlq-reader-${randomUUID()}`, maxWaitTimeInMs: 100 });
  const found: DeadLetter[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${found.length} of ${count} dead letters in ${timeoutMs} ms`)), timeoutMs);
      void consumer.run({
        eachMessage: async ({ message }) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
          found.push({ key: message.key?.toString() ?? null, value: message.value?.toString() ?? null, headers });
          if (found.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
  return found;
}

/** Polls `check` until it returns without throwing. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 30_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
