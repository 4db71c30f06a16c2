import { randomUUID } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import type { Projection } from './projection.js';

/**
 * Segmented processors (docs/design.md "Segmented processors"): a projection that can be split
 * runs as `count` segments, each with its own checkpoint and lease; this module names them, keys
 * them, and claims, renews and releases their leases.
 */

/** PROJECTION_SEGMENTS as parsed (shared/config.ts): `all` for every projection that can be split and is not named. */
export interface ProjectionSegments {
  all: number;
  byName: Record<string, number>;
}

/** One segment of a projection, as the engine runs it. */
export interface Segment {
  /** The projection as a whole (its name is the segments' base name). */
  base: Projection;
  index: number;
  count: number;
  /** The segment as a projection of its own: its checkpoint name, and an apply of its keys only. */
  projection: Projection;
}

/** The checkpoint and lease name of segment `index` of `count`: the projection's own name for one segment. */
export function segmentName(name: string, index: number, count: number): string {
  return count === 1 ? name : `${name}#${index}/${count}`;
}

/** A segment name's parts, or null for a projection's own name. */
export function parseSegmentName(name: string): { base: string; index: number; count: number } | null {
  const match = /^(.+)#(\d+)\/(\d+)$/.exec(name);
  if (!match) return null;
  return { base: match[1]!, index: Number(match[2]), count: Number(match[3]) };
}

/** How many segments `projection` runs as under PROJECTION_SEGMENTS: 1 when it cannot be split. */
export function segmentCount(projection: Projection, config: ProjectionSegments | undefined): number {
  if (!projection.splittable || !config) return 1;
  return config.byName[projection.name] ?? config.all;
}

/** The segments of `projection`. */
export function segmentsOf(projection: Projection, count: number): Segment[] {
  if (count === 1) return [{ base: projection, index: 0, count: 1, projection }];
  return Array.from({ length: count }, (_, index) => ({
    base: projection,
    index,
    count,
    projection: {
      ...projection,
      name: segmentName(projection.name, index, count),
      apply: (events, tx, options) => projection.apply(events, tx, { ...options, segment: { index, count } }),
    },
  }));
}

/**
 * The segment a key belongs to: FNV-1a (32 bits) of its text, modulo `count`. Stable across
 * processes, versions and machines: the segments' checkpoints depend on it.
 */
export function segmentOfKey(key: string, count: number): number {
  if (count === 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % count;
}

/**
 * A process's claims on segments of one read-model schema: its membership (so that processes share
 * the segments fairly), and per segment a lease with an epoch. Claims, renewals and releases each
 * take one statement.
 */
export class SegmentLeases {
  readonly owner = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  /** Segment names held, by projection. */
  private readonly held = new Map<string, Set<string>>();
  private readonly schema: string;

  constructor(
    private readonly pool: pg.Pool,
    schema: string,
    readonly leaseMs: number,
  ) {
    this.schema = pg.escapeIdentifier(schema);
  }

  /** Renews this process's membership (every renewal); members not renewed within the lease do not count. */
  async heartbeat(): Promise<void> {
    await this.pool.query(
      `INSERT INTO ${this.schema}.projector_members (owner, expires_at) VALUES ($1, now() + $2 * interval '1 millisecond')
       ON CONFLICT (owner) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
      [this.owner, this.leaseMs],
    );
  }

  /** Leaves: its membership goes at once, so the others' share grows now. */
  async leave(): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.schema}.projector_members WHERE owner = $1`, [this.owner]);
  }

  /** ceil(segments / live members): the most segments of one projection a process keeps. */
  async fairShare(count: number): Promise<number> {
    if (count === 1) return 1;
    const { rows } = await this.pool.query<{ members: string }>(
      `SELECT count(*)::text AS members FROM ${this.schema}.projector_members WHERE expires_at > now() OR owner = $1`,
      [this.owner],
    );
    return Math.ceil(count / Math.max(1, Number(rows[0]?.members ?? 1)));
  }

  heldOf(segment: Segment): Set<string> {
    let held = this.held.get(segment.base.name);
    if (!held) this.held.set(segment.base.name, (held = new Set()));
    return held;
  }

  /**
   * Whether this process may claim one more segment of the projection (below its fair share). The
   * segments held are counted after the share is known: other segments' followers claim and
   * release while it is asked.
   */
  async mayClaim(segment: Segment): Promise<boolean> {
    const share = await this.fairShare(segment.count);
    return this.heldOf(segment).size < share;
  }

  /**
   * Whether it holds more than its share, and this segment is the one to give up (its highest).
   * The count and the highest are of the same moment, after the share is known: a count from
   * before the others released theirs would give up a segment that is within the share.
   */
  async overShare(segment: Segment): Promise<boolean> {
    const share = await this.fairShare(segment.count);
    const held = this.heldOf(segment);
    if (held.size <= share) return false;
    const highest = [...held].map((name) => parseSegmentName(name)?.index ?? 0).reduce((a, b) => Math.max(a, b), 0);
    return highest === segment.index;
  }

  /**
   * Claims the segment on the follower's own connection (whose backend pid the lease records): it
   * takes the lease when there is none, when it has expired, when it is this process's own, or
   * when its holder's connection is gone. The new epoch, or null when another process holds it.
   */
  async claim(client: pg.ClientBase, segment: Segment): Promise<number | null> {
    const { rows } = await client.query<{ epoch: string }>(
      `INSERT INTO ${this.schema}.projection_leases AS l (name, owner, epoch, backend_pid, expires_at)
       VALUES ($1, $2, 1, pg_backend_pid(), now() + $3 * interval '1 millisecond')
       ON CONFLICT (name) DO UPDATE
         SET owner = EXCLUDED.owner, epoch = l.epoch + 1, backend_pid = EXCLUDED.backend_pid, expires_at = EXCLUDED.expires_at
       WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = l.backend_pid)
       RETURNING epoch::text`,
      [segment.projection.name, this.owner, this.leaseMs],
    );
    const epoch = rows[0]?.epoch;
    if (epoch === undefined) return null;
    this.heldOf(segment).add(segment.projection.name);
    return Number(epoch);
  }

  /** Moves the lease's end on, while it is still this epoch's: false when another process claimed it. */
  async renew(segment: Segment, epoch: number): Promise<boolean> {
    const result = await this.pool.query(
      `UPDATE ${this.schema}.projection_leases SET expires_at = now() + $3 * interval '1 millisecond'
        WHERE name = $1 AND owner = $2 AND epoch = $4`,
      [segment.projection.name, this.owner, this.leaseMs, epoch],
    );
    return (result.rowCount ?? 0) > 0;
  }

  /** Gives the segment up (after its batch in flight): another process may claim it at once. */
  async release(segment: Segment, epoch: number | null): Promise<void> {
    this.heldOf(segment).delete(segment.projection.name);
    if (epoch === null) return;
    await this.pool.query(`UPDATE ${this.schema}.projection_leases SET expires_at = now() WHERE name = $1 AND owner = $2 AND epoch = $3`, [
      segment.projection.name,
      this.owner,
      epoch,
    ]);
  }

  /** Forgets a segment lost to another process (nothing to write: the lease is theirs). */
  lost(segment: Segment): void {
    this.heldOf(segment).delete(segment.projection.name);
  }
}

/**
 * Checkpoints of the projection kept for another segment count than `count` (a number of segments
 * changed without a rebuild), with a position past the start: their names, else an empty list.
 */
export async function checkpointsOfOtherCounts(client: pg.ClientBase, schema: string, segment: Segment, start: string): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT name FROM ${pg.escapeIdentifier(schema)}.projection_checkpoints
      WHERE (name = $1 OR left(name, length($1) + 1) = $1 || '#') AND position <> $2`,
    [segment.base.name, start],
  );
  return rows
    .map((row) => row.name)
    .filter((name) => {
      const parsed = parseSegmentName(name);
      const count = name === segment.base.name ? 1 : parsed?.base === segment.base.name ? parsed.count : segment.count;
      return count !== segment.count;
    });
}
