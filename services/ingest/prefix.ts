/** Where handheld submissions arrive on the ingest listener. */
export const INGEST_PREFIX = '/ingest/v1';
