import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, gzip } from 'node:zlib';

/**
 * Builds the console (this folder) into dist/ when its output is missing or older than its sources:
 * `npm start`, `npm run dev` and the test suite's global setup call it, so a fresh clone's
 * `npm ci && npm start` serves the pages with no extra command. The output is not committed.
 *
 *   node --import tsx services/api/console/web/build.ts           build when stale
 *   node --import tsx services/api/console/web/build.ts --force   build anyway
 */

export const WEB_DIR = path.dirname(fileURLToPath(import.meta.url));
export const WEB_DIST = path.join(WEB_DIR, 'dist');
const STAMP = path.join(WEB_DIST, '.source-hash');
const require = createRequire(import.meta.url);

async function listFiles(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(entries.map((e) => (e.isDirectory() ? listFiles(path.join(dir, e.name)) : [path.join(dir, e.name)])));
  return nested.flat().sort();
}

/** What the output depends on: the sources, the build's configuration and the bundled packages' versions. */
async function sourceHash(): Promise<string> {
  const hash = createHash('sha256');
  for (const name of ['vite', 'preact']) hash.update(`${name}@${(require(`${name}/package.json`) as { version: string }).version}\0`);
  const files = [path.join(WEB_DIR, 'index.html'), path.join(WEB_DIR, 'vite.config.ts'), path.join(WEB_DIR, 'build.ts'), ...(await listFiles(path.join(WEB_DIR, 'src')))];
  for (const file of files) hash.update(`${path.relative(WEB_DIR, file)}\0`).update(await fs.readFile(file)).update('\0');
  return hash.digest('hex');
}

/** Precompressed copies for @fastify/static's `preCompressed`: no compression per request. */
async function precompress(): Promise<void> {
  const gz = promisify(gzip);
  const br = promisify(brotliCompress);
  for (const file of await listFiles(WEB_DIST)) {
    if (!/\.(js|css|html|svg)$/.test(file)) continue;
    const body = await fs.readFile(file);
    await fs.writeFile(`${file}.gz`, await gz(body, { level: 9 }));
    await fs.writeFile(`${file}.br`, await br(body));
  }
}

/** Builds when the output is missing or stale; answers whether it built. */
export async function buildConsole(options: { force?: boolean } = {}): Promise<boolean> {
  const wanted = await sourceHash();
  const have = await fs.readFile(STAMP, 'utf8').catch(() => null);
  if (!options.force && have === wanted) return false;
  const { build } = await import('vite');
  await build({ configFile: path.join(WEB_DIR, 'vite.config.ts'), logLevel: 'warn' });
  await precompress();
  await fs.writeFile(STAMP, wanted);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const built = await buildConsole({ force: process.argv.includes('--force') });
  if (built) process.stderr.write(`console built into services/api/console/web/dist in ${Date.now() - started} ms\n`);
}
