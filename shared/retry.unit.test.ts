import { describe, expect, it } from 'vitest';
import { retryPauseMs, sleep, untilDone } from './retry.js';

class Passing extends Error {}

/** Work that fails with `Passing` the first `failures` times it runs, and counts its runs. */
function failingWork(failures: number) {
  const work = async () => {
    work.runs++;
    if (work.runs <= failures) throw new Passing(`failure ${work.runs}`);
  };
  work.runs = 0;
  return work;
}

describe('sleep', () => {
  it('waits the time, or resolves as soon as its signal aborts (at once when it already has)', async () => {
    let started = performance.now();
    await sleep(30);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);

    const abort = new AbortController();
    started = performance.now();
    setTimeout(() => abort.abort(), 20);
    await sleep(10_000, abort.signal);
    expect(performance.now() - started).toBeLessThan(5_000);

    started = performance.now();
    await sleep(10_000, abort.signal);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('untilDone', () => {
  it('pauses 200 ms after the first failure, doubling up to 2 s', () => {
    expect([1, 2, 3, 4, 5].map(retryPauseMs)).toEqual([200, 400, 800, 1600, 2000]);
  });

  it('runs the work again after each retryable failure until it succeeds, telling each failure and pausing before each run again', async () => {
    const work = failingWork(2);
    const told: number[] = [];
    const events: string[] = [];
    const started = performance.now();
    const done = await untilDone(work, {
      retryable: (error) => error instanceof Passing,
      onRetry: (_error, attempt) => told.push(attempt),
      wanted: () => true,
      beforePause: async () => {
        events.push(`pause after ${work.runs}`);
        throw new Error('a failing heartbeat is ignored');
      },
    });
    expect(done).toBe(true);
    expect(work.runs).toBe(3);
    expect(told).toEqual([1, 2]);
    expect(events).toEqual(['pause after 1', 'pause after 2']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(retryPauseMs(1) + retryPauseMs(2) - 10);
  });

  it('throws a failure that is not retryable, at once', async () => {
    const work = failingWork(5);
    await expect(untilDone(work, { retryable: () => false, onRetry: () => expect.fail('not retried'), wanted: () => true })).rejects.toThrow('failure 1');
    expect(work.runs).toBe(1);
  });

  it('answers false when the work stops being wanted: at once after a failure, or after the pause', async () => {
    const unwanted = failingWork(5);
    const started = performance.now();
    expect(await untilDone(unwanted, { retryable: () => true, onRetry: () => undefined, wanted: () => false })).toBe(false);
    expect(unwanted.runs).toBe(1);
    expect(performance.now() - started).toBeLessThan(retryPauseMs(1));

    const work = failingWork(5);
    let asked = 0;
    expect(await untilDone(work, { retryable: () => true, onRetry: () => undefined, wanted: () => ++asked < 2 })).toBe(false);
    expect(work.runs).toBe(1);
    expect(asked).toBe(2);
  });
});
