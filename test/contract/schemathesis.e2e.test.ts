import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MINTABLE_SCOPES } from '../../shared/auth/scopes.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The contract fuzzer: Schemathesis (PyPI, version pinned in ./requirements.txt) against both
 * published OpenAPI documents of a started service, with every check, the stateful phase, and a
 * fixed seed, so a run is reproducible. `.ci/run` installs it into .cache/schemathesis/venv
 * (test/contract/install.sh); without it a developer's run skips this file with one line saying
 * how to install, and a CI run (CI=true) fails instead of skipping.
 *
 * Refusals the documents cannot express (two fields compared, stored rows) are excused, each by
 * its contract line, in ./schemathesis_hooks.py; nothing else is relaxed.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const HERE = path.join(ROOT, 'test/contract');
const VENV_BIN = path.join(ROOT, '.cache/schemathesis/venv/bin/schemathesis');
/** Reproduce a finding with the same seed: SCHEMATHESIS_SEED overrides it for exploring. */
const SEED = process.env.SCHEMATHESIS_SEED ?? '20261126';
/**
 * Examples per operation and phase (SCHEMATHESIS_MAX_EXAMPLES overrides both): the public document
 * has 40 operations, the ingest one a single operation, so it gets more of each. Together about a
 * minute and a half on a shared 2-core machine.
 */
const MAX_EXAMPLES = { public: process.env.SCHEMATHESIS_MAX_EXAMPLES ?? '50', ingest: process.env.SCHEMATHESIS_MAX_EXAMPLES ?? '300' };
const REPORT_DIR = path.join(ROOT, 'test-results/schemathesis');

function findSchemathesis(): { bin: string; version: string } | null {
  for (const bin of [process.env.SCHEMATHESIS_BIN, VENV_BIN, 'schemathesis']) {
    if (!bin) continue;
    const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    if (probe.status === 0) return { bin, version: probe.stdout.trim() };
  }
  return null;
}

const found = findSchemathesis();
const INSTALL_HINT = 'install it with `bash test/contract/install.sh` (a virtualenv in .cache/schemathesis, as .ci/run does)';
const inCi = process.env.CI === 'true';
if (!found && !inCi) console.warn(`Schemathesis contract fuzzing skipped: schemathesis is not installed; ${INSTALL_HINT}.`);

interface Run {
  code: number | null;
  output: string;
  junit: string;
  seconds: number;
}

/** Runs `schemathesis run` without blocking this process, which serves the requests. */
function schemathesis(args: string[]): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(found!.bin, args, {
      // Its crash cache (.schemathesis/, for `st replay <id>`) lands beside the reports, ignored.
      cwd: REPORT_DIR,
      env: { ...process.env, PYTHONPATH: HERE, SCHEMATHESIS_HOOKS: 'schemathesis_hooks', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const junitPath = args[args.indexOf('--report-junit-path') + 1]!;
      const junit = fs.existsSync(junitPath) ? fs.readFileSync(junitPath, 'utf8') : '';
      fs.writeFileSync(junitPath.replace(/\.junit\.xml$/, '.txt'), output);
      resolve({ code, output, junit, seconds: (Date.now() - started) / 1000 });
    });
  });
}

/** The failures section of Schemathesis's output (what failed, the request, the answer, a curl line). */
function failuresOf(run: Run): string {
  const start = run.output.indexOf('=== FAILURES');
  const end = run.output.indexOf('=== WARNINGS');
  const section = start >= 0 ? run.output.slice(start, end > start ? end : undefined) : run.output;
  return section.length > 20_000 ? `${section.slice(0, 20_000)}\n… (the whole output: test-results/schemathesis/)` : section;
}

function commandLine(name: 'public' | 'ingest', documentUrl: string, baseUrl: string, token: string): string[] {
  fs.mkdirSync(REPORT_DIR, { recursive: true });
  return [
    'run',
    documentUrl,
    '--url',
    baseUrl,
    '--header',
    `Authorization: Bearer ${token}`,
    '--checks',
    'all',
    '--phases',
    'examples,coverage,fuzzing,stateful',
    '--seed',
    SEED,
    '--max-examples',
    MAX_EXAMPLES[name],
    // docs/api.md "What text the service accepts": no string or key may contain U+0000 (Postgres
    // cannot store it), and the service answers 400 for it everywhere (test/hardening).
    '--generation-allow-x00',
    'false',
    // No example database across runs: the seed alone decides what is sent.
    '--generation-database',
    'none',
    // One worker: Hypothesis's internals are not thread-safe (two raised "AST constructor
    // recursion depth mismatch" runtime errors here), and the machine has two cores for both sides.
    '--workers',
    '1',
    '--request-timeout',
    '30',
    '--report',
    'junit',
    '--report-junit-path',
    path.join(REPORT_DIR, `${name}.junit.xml`),
    // The keys are this run's own, in a database dropped at the end: readable failures matter more.
    '--output-sanitize',
    'false',
    '--output-truncate',
    'false',
    '--no-color',
  ];
}

let svc: TestService;
let apiToken: string;
let ingestToken: string;

describe.runIf(found !== null || inCi)(`Schemathesis ${found?.version ?? '(missing)'} against the published documents`, () => {
  beforeAll(async () => {
    if (!found) return;
    // The fuzzer is one key sending thousands of requests: no 429 in its way.
    svc = await startTestService('schemathesis', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
    const org = await createOrg(svc.service.ctx, 'Schemathesis');
    apiToken = (await mintApiKey(svc.service.ctx, { orgId: org.id, name: 'schemathesis', scopes: MINTABLE_SCOPES })).token;
    ingestToken = (await mintApiKey(svc.service.ctx, { orgId: org.id, name: 'schemathesis-ingest', scopes: ['scans:write'] })).token;
    // A few rows with small ids, so that generated ids and references hit something.
    const post = (pathname: string, body: unknown) =>
      fetch(`${svc.apiUrl}${pathname}`, { method: 'POST', headers: { ...bearer(apiToken), 'content-type': 'application/json' }, body: JSON.stringify(body) });
    for (const n of [1, 2, 3]) {
      expect((await post('/locations', { external_key: `L${n}`, name: `Location ${n}`, tags: [{ tag_type: 'barcode', value: `LOC-${n}` }] })).status).toBe(201);
      expect((await post('/assets', { external_key: `A${n}`, name: `Asset ${n}`, tags: [{ tag_type: 'rfid', value: `${n}` }] })).status).toBe(201);
    }
  });
  afterAll(async () => {
    await svc?.stop();
  });

  const check = async (name: 'public' | 'ingest') => {
    if (!found) throw new Error(`CI=true and schemathesis is not installed; ${INSTALL_HINT}.`);
    const [baseUrl, token] = name === 'public' ? [svc.apiUrl, apiToken] : [svc.ingestUrl, ingestToken];
    // Each listener serves its own document at its root (shared/http/openapi.ts registerOpenApi).
    const run = await schemathesis(commandLine(name, `${new URL(baseUrl).origin}/openapi/v1.json`, baseUrl, token));
    const failures = Number(/<testsuites[^>]*\bfailures="(\d+)"/.exec(run.junit)?.[1] ?? NaN);
    const errors = Number(/<testsuites[^>]*\berrors="(\d+)"/.exec(run.junit)?.[1] ?? NaN);
    console.info(`schemathesis ${name}: exit ${run.code}, ${failures} failures, ${errors} errors, ${run.seconds.toFixed(1)} s (seed ${SEED}, ${MAX_EXAMPLES[name]} examples)`);
    expect({ exit: run.code, failures, errors }, failuresOf(run)).toEqual({ exit: 0, failures: 0, errors: 0 });
  };

  it('public API (/api/v1): every check, a key with every scope', { timeout: 600_000 }, async () => {
    await check('public');
  });

  it('ingest API (/ingest/v1): every check, an ingestion key (scans:write)', { timeout: 600_000 }, async () => {
    await check('ingest');
  });
});

// The reason, visible in the report among the skipped tests.
if (!found && !inCi) it.skip(`Schemathesis contract fuzzing: schemathesis is not installed; ${INSTALL_HINT}`, () => {});
