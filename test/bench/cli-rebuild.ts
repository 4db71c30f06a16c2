import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RebuildResult } from '../../shared/projection/rebuild.js';
import { endedChildrenCpuUs, postgresCpuUs } from './proc.js';

/**
 * `npm run cli -- projections rebuild --json`, as an operator runs it, for the benches that time
 * a rebuild (replay.bench.ts, alerts.bench.ts): its own process (so its work does not share the
 * API's event loop), against the bench's database, with the CPU it and the Postgres server spent.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The bench service's key-encryption key (its signing keys are stored encrypted). */
export const KEY_ENCRYPTION_KEY = randomBytes(32).toString('base64');

export interface CliRebuild {
  result: RebuildResult;
  /** Seconds from the first progress line to the first line of each later phase. */
  phases: Record<string, number>;
  /** CPU spent during the rebuild, microseconds: the CLI process, the Postgres server. */
  cpu: { cli: number; postgres: number };
}

export interface RebuildOptions {
  /** The projections to rebuild (all when absent). */
  names?: string[];
  /** PROJECTION_SEGMENTS and `--parallel`. */
  split?: { segments: number; parallel: number };
  /**
   * Another checkout whose CLI runs instead of this one's (a before/after in one run: a copy of the
   * older code with its node_modules, as BENCH_ALERTS_COMPARE names one).
   */
  root?: string;
}

export function cliRebuild(databaseUrl: string, postmaster: number, options: RebuildOptions = {}): Promise<CliRebuild> {
  const { names = [], split, root = ROOT } = options;
  const cliBefore = endedChildrenCpuUs();
  const postgresBefore = postgresCpuUs(postmaster);
  return new Promise((resolve, reject) => {
    // BENCH_CPU_PROF=<dir>: the CLI writes a V8 CPU profile of each rebuild there (open it in Chrome's DevTools).
    const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
    const parallel = split ? ['--parallel', String(split.parallel)] : [];
    const segments = split ? { PROJECTION_SEGMENTS: String(split.segments) } : {};
    const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'services/cli/main.ts', 'projections', 'rebuild', ...names, ...parallel, '--json'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', SIGNING_KEY_ENCRYPTION_KEY: KEY_ENCRYPTION_KEY, ...segments },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let first: number | null = null;
    const phases: Record<string, number> = {};
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      for (const match of chunk.toString().matchAll(/^rebuild: ([a-z ]+),/gm)) {
        first ??= performance.now();
        phases[match[1]!] ??= (performance.now() - first) / 1000;
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`rebuild exited ${code}: ${stderr}`));
      // 'exit' comes once the child has been waited for: its CPU is in this process's cutime.
      const cpu = { cli: endedChildrenCpuUs() - cliBefore, postgres: postgresCpuUs(postmaster) - postgresBefore };
      resolve({ result: JSON.parse(stdout) as RebuildResult, phases, cpu });
    });
  });
}
