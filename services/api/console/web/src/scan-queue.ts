import { openDB, type DBSchema, type IDBPDatabase } from 'idb';
import { monotonicFactory } from 'ulid';

/**
 * The Scan page's reads, kept in the browser's IndexedDB (docs/console.md, "Scan"): each read is
 * stored the moment it is taken, with its `submission_id` drawn then and never again, so sending
 * it twice (a retry after a lost answer, a reload, another tab) is one submission to the server,
 * which records it once. A read waits (`pending`) until the server has answered it; a reload or
 * a lost connection keeps it. `idb` wraps IndexedDB's events in promises.
 */

export type TagType = 'rfid' | 'ble' | 'barcode';

/** What the server said a read placed (`POST /app/api/scans`, docs/web-app.md "Scanning in the console"). */
export interface PlacedRead {
  tag_type: string;
  value: string;
  asset: { id: number; external_key: string | null; name: string } | null;
  cause: string | null;
}

export interface QueuedRead {
  submission_id: string;
  /** The organization it was taken for: a page shows and sends only its own organization's. */
  org_id: number;
  location: { id: number; name: string; external_key: string | null };
  tag_type: TagType;
  value: string;
  /** When it was scanned (sent as the read's observed_at). */
  observed_at: string;
  /** pending: not answered yet; placed/unknown: answered; refused: the server refused it (it is not sent again). */
  status: 'pending' | 'placed' | 'unknown' | 'refused';
  placed: PlacedRead | null;
  /** A refusal's words. */
  problem: string | null;
  /** How many times it was sent without an answer. */
  attempts: number;
}

interface ScanDb extends DBSchema {
  reads: { key: string; value: QueuedRead; indexes: { by_org: number } };
}

const DB_NAME = 'console-scans';
/** How many answered reads a browser keeps per organization (the newest); pending ones are always kept. */
export const KEPT_ANSWERED = 200;

let opened: Promise<IDBPDatabase<ScanDb>> | null = null;
/** ULIDs that grow within one millisecond too, so reads scanned in one keep their order. */
const nextId = monotonicFactory();

function db(): Promise<IDBPDatabase<ScanDb>> {
  opened ??= openDB<ScanDb>(DB_NAME, 1, {
    upgrade(database) {
      const reads = database.createObjectStore('reads', { keyPath: 'submission_id' });
      reads.createIndex('by_org', 'org_id');
    },
  });
  return opened;
}

/** Stores a new read, pending, with its submission_id drawn now (a ULID: ordered by time, then by scan). */
export async function enqueueRead(read: Pick<QueuedRead, 'org_id' | 'location' | 'tag_type' | 'value'>): Promise<QueuedRead> {
  const queued: QueuedRead = { ...read, submission_id: nextId(), observed_at: new Date().toISOString(), status: 'pending', placed: null, problem: null, attempts: 0 };
  await (await db()).put('reads', queued);
  return queued;
}

/** An organization's reads, oldest first (submission ids are ULIDs); answered ones past the newest KEPT_ANSWERED are forgotten. */
export async function readsOf(orgId: number): Promise<QueuedRead[]> {
  const database = await db();
  const all = (await database.getAllFromIndex('reads', 'by_org', orgId)).sort((a, b) => (a.submission_id < b.submission_id ? -1 : 1));
  const answered = all.filter((r) => r.status !== 'pending');
  const dropped = new Set(answered.slice(0, Math.max(0, answered.length - KEPT_ANSWERED)).map((r) => r.submission_id));
  if (dropped.size > 0) {
    const tx = database.transaction('reads', 'readwrite');
    await Promise.all([...[...dropped].map((id) => tx.store.delete(id)), tx.done]);
  }
  return all.filter((r) => !dropped.has(r.submission_id));
}

export async function saveRead(read: QueuedRead): Promise<void> {
  await (await db()).put('reads', read);
}

/** Forgets an organization's answered reads (Clear); pending ones stay until they are sent. */
export async function clearAnswered(orgId: number): Promise<void> {
  const database = await db();
  const tx = database.transaction('reads', 'readwrite');
  const reads = await tx.store.index('by_org').getAll(orgId);
  await Promise.all([...reads.filter((r) => r.status !== 'pending').map((r) => tx.store.delete(r.submission_id)), tx.done]);
}
