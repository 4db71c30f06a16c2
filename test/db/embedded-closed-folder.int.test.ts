import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { closedFolderOnTheWay, closedFolderRefusal, startEmbeddedPostgres } from '../../shared/db/embedded.js';

/**
 * As root, the embedded Postgres runs as the `postgres` user, who cannot enter a folder of mode
 * 700 such as root's home (docs/operations.md, "Running as root"): `npm start` and `npm test`
 * from such a folder must work, or stop with one line naming the folder and the fix.
 */

const asRoot = process.getuid?.() === 0;
const made: string[] = [];

async function closedFolder(): Promise<string> {
  const folder = await fs.mkdtemp(path.join(os.tmpdir(), 'closed-'));
  await fs.chmod(folder, 0o700);
  made.push(folder);
  return folder;
}

afterAll(async () => {
  for (const folder of made) await fs.rm(folder, { recursive: true, force: true });
});

describe('a folder the postgres user cannot enter', () => {
  it('is found on the way to a path, first from the root down', async () => {
    const outer = await closedFolder();
    const inner = path.join(outer, 'inner');
    await fs.mkdir(inner, { mode: 0o700 });
    await fs.chmod(inner, 0o700);
    const stranger = { uid: 65_534, gid: 65_534 };
    const found = await closedFolderOnTheWay(path.join(inner, 'data', 'pg'), stranger.uid, stranger.gid);
    expect(found?.folder).toBe(outer);
    expect((found?.mode ?? 0) & 0o777).toBe(0o700);

    // Passable for others: nothing closed on the way.
    await fs.chmod(outer, 0o711);
    await fs.chmod(inner, 0o711);
    expect(await closedFolderOnTheWay(path.join(inner, 'data', 'pg'), stranger.uid, stranger.gid)).toBeNull();

    // The owner passes by the owner's bit, a member of the group by the group's.
    await fs.chmod(outer, 0o710);
    const { gid } = await fs.stat(outer);
    expect(await closedFolderOnTheWay(path.join(inner, 'x'), stranger.uid, gid)).toBeNull();
    expect((await closedFolderOnTheWay(path.join(inner, 'x'), stranger.uid, stranger.gid))?.folder).toBe(outer);
  });

  it('names the folder and the fix in one line', () => {
    const line = closedFolderRefusal('/home/someone', 0o40700);
    expect(line).not.toContain('\n');
    expect(line).toContain('cannot enter /home/someone (mode 700)');
    expect(line).toContain('chmod o+x /home/someone');
    expect(line).toContain('setpriv');
  });

  it.runIf(asRoot)('does not stop a start as root whose data folder is inside it', { timeout: 120_000 }, async () => {
    const outer = await closedFolder();
    const dataDir = path.join(outer, 'data');
    const server = await startEmbeddedPostgres({ dataDir, unsafeFast: true, role: 'cli' });
    try {
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ answer: number }>('SELECT 6 * 7 AS answer');
        expect(rows[0]!.answer).toBe(42);
      } finally {
        await client.end();
      }
      // The folder the person chose keeps its mode: nothing was opened to others.
      expect((await fs.stat(outer)).mode & 0o777).toBe(0o700);
    } finally {
      await server.stop();
    }
  });
});
