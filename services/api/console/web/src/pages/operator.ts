/**
 * The operator pages (and Scan), loaded when one of them opens (main.tsx): the first page's script stays
 * the size of the pages most people use.
 */
export { LivePage } from './live.js';
export { ReadersPage } from './readers.js';
export { UnknownReadsPage } from './unknown-reads.js';
export { ScanPage } from './scan.js';
