/**
 * Seeded randomness, for what must come out the same on every run: the demo's data, the
 * benchmarks' logs, the random orders of tests (a failure names its seed, and the seed replays it).
 * Not for anything secret.
 */

/** A PRNG (mulberry32) over [0, 1): the same seed gives the same sequence. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A shuffled copy (Fisher-Yates), from a seed or a seeded PRNG. */
export function shuffled<T>(items: readonly T[], seed: number | (() => number)): T[] {
  const random = typeof seed === 'number' ? seededRandom(seed) : seed;
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
