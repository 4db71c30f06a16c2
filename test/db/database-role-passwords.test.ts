import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, expect, it } from 'vitest';
import { databaseRolePassword } from '../../shared/db/database-roles.js';

// Processes starting at once (an `npm start`, a CLI run) each generate a password for a database
// role and race to its file in DATA_DIR: every one must come away with the single password that
// won, never an empty or half-written file, and no draft may be left behind.

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

it('gives concurrent callers one password, whole, from a 0600 file', async () => {
  for (let round = 0; round < 50; round++) {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-passwords-'));
    dirs.push(dir);
    const passwords = await Promise.all(Array.from({ length: 16 }, () => databaseRolePassword(dir, 'db_runtime')));
    expect(passwords[0]).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(new Set(passwords)).toEqual(new Set([passwords[0]]));
    expect(await fs.readdir(dir)).toEqual(['db_runtime.password']);
    expect((await fs.stat(path.join(dir, 'db_runtime.password'))).mode & 0o777).toBe(0o600);
  }
});

it('never shows another process the file before its password is in it', async () => {
  // A process starting at that moment, polling from before the file exists until it reads it.
  for (let round = 0; round < 10; round++) {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-passwords-'));
    dirs.push(dir);
    const file = path.join(dir, 'db_runtime.password');
    const poller = spawn(process.execPath, ['-e', POLLER, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    poller.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = once(poller, 'exit');
    await once(poller.stdout, 'data'); // polling
    const password = await databaseRolePassword(dir, 'db_runtime');
    await exited;
    expect(output).toBe(`polling\n${JSON.stringify(`${password}\n`)}\n`);
  }
});

/** Reads the file in a tight loop until it exists, prints what it read first. */
const POLLER = `
const fs = require('node:fs');
process.stdout.write('polling\\n');
for (;;) {
  try { process.stdout.write(JSON.stringify(fs.readFileSync(process.argv[1], 'utf8')) + '\\n'); break; } catch {}
}`;

it('refuses an empty password file instead of connecting with no password', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-passwords-'));
  dirs.push(dir);
  await fs.writeFile(path.join(dir, 'db_runtime.password'), '\n', { mode: 0o600 });
  await expect(databaseRolePassword(dir, 'db_runtime')).rejects.toThrow(/db_runtime\.password is empty/);
});
