import type { RoleFactory } from '../role.js';

/** Scan ingestion: the handheld listener and the fixed-reader consumer (not in this build yet). */
export const ingestRole: RoleFactory = () => ({
  name: 'ingest',
  async start() {},
  async stop() {},
  urls: () => ({}),
});
