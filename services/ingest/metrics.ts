import client from 'prom-client';
import type { UnknownCause } from '../../shared/domain/scans/events.js';
import { metricsRegistry } from '../ops/metrics.js';

/** Reads ingested, by path and outcome: `placed`, or the cause of a read that placed nothing. */
const readsTotal = new client.Counter({
  name: 'tracking_ingest_reads_total',
  help: 'Reads ingested, by path (handheld, kafka, mqtt) and outcome (placed, or the cause of a read that placed nothing)',
  labelNames: ['path', 'outcome'] as const,
  registers: [metricsRegistry],
});

export interface IngestMetrics {
  recorded(path: 'handheld' | 'kafka' | 'mqtt', placed: number, unknownByCause: ReadonlyMap<UnknownCause, number>): void;
}

export const ingestMetrics: IngestMetrics = {
  recorded(path, placed, unknownByCause) {
    if (placed > 0) readsTotal.inc({ path, outcome: 'placed' }, placed);
    for (const [cause, n] of unknownByCause) readsTotal.inc({ path, outcome: cause }, n);
  },
};
