import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * README "OpenAPI and generated clients": the one command that turns a published document into
 * TypeScript types (openapi-typescript), a client over them (openapi-fetch) that tsc accepts in
 * strict mode and that works against the running service. Its requests go through the contract
 * guard like every other test's.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
// Inside the project (so the client resolves openapi-fetch), ignored by git and eslint.
const OUT = path.join(ROOT, 'test-results', 'openapi-client');
const run = promisify(execFile);

let svc: TestService;
let token: string;
let scanToken: string;

beforeAll(async () => {
  svc = await startTestService('openapi_client');
  const org = await createOrg(svc.service.ctx, 'Generated');
  token = (await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] })).token;
  scanToken = (await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['scans:write'] })).token;
});
afterAll(async () => {
  await svc?.stop();
});

// What a partner writes against the generated types: every call below is checked by tsc.
const CLIENT = `
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './tracking-api.js';
import type { paths as IngestPaths } from './tracking-ingest.js';

export async function tour(apiUrl: string, ingestUrl: string, token: string, scanToken: string) {
  const api = createClient<paths, 'application/json'>({ baseUrl: apiUrl, headers: { Authorization: \`Bearer \${token}\` } });
  const hall = await api.POST('/locations', { body: { name: 'Hall', external_key: 'HALL-1' } });
  if (!hall.data) throw new Error(\`POST /locations: \${hall.response.status}\`);
  const created = await api.POST('/assets', { body: { name: 'Forklift', tags: [{ tag_type: 'rfid', value: 'E2801160600002084D9F34A9' }] } });
  if (!created.data) throw new Error(\`POST /assets: \${created.response.status}\`);
  const asset = created.data.data;
  const id: number = asset.id;
  // A PATCH body is a merge patch: say so (openapi-fetch sends application/json by default).
  const patched = await api.PATCH('/assets/{asset_id}', {
    params: { path: { asset_id: id } },
    body: { description: 'yard' },
    headers: { 'Content-Type': 'application/merge-patch+json' },
  });
  const missing = await api.GET('/assets/{asset_id}', { params: { path: { asset_id: 2147483000 } } });
  const page = await api.GET('/assets', { params: { query: { external_key: [asset.external_key], limit: 10 } } });
  const head = await api.HEAD('/assets/{asset_id}', { params: { path: { asset_id: id } } });

  const ingest = createClient<IngestPaths>({ baseUrl: ingestUrl, headers: { Authorization: \`Bearer \${scanToken}\` } });
  const scan = await ingest.POST('/scans', {
    body: { submission_id: 'generated-1', device_id: 'hh-1', location: { external_key: 'HALL-1' }, reads: [{ tag_type: 'rfid', value: 'E2801160600002084D9F34A9' }] },
  });
  const history = await api.GET('/assets/{asset_id}/history', { params: { path: { asset_id: id } } });
  return {
    location: created.response.headers.get('Location'),
    description: patched.data?.data.description ?? null,
    missing: [missing.response.status, missing.error?.error.type],
    listed: page.data?.data.map((a) => a.id),
    total: page.data?.total_count,
    head: head.response.status,
    accepted: scan.data?.data.accepted,
    visits: history.data?.data.map((v) => v.location_external_key),
  };
}

/** What the types refuse (tsc checks these; they never run). */
export function refused(api: Client<paths>): void {
  // @ts-expect-error name is a string
  void api.POST('/assets', { body: { name: 7 } });
  // @ts-expect-error no such path
  void api.GET('/asset');
  // @ts-expect-error asset_id is a path parameter the call must give
  void api.GET('/assets/{asset_id}', {});
  // @ts-expect-error is_active is a boolean filter
  void api.GET('/assets', { params: { query: { is_active: 'yes' } } });
}
`;

/** tsc's diagnostics of each file, from one program (the libraries are checked once). */
function diagnosticsOf(files: string[]): string[][] {
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    skipLibCheck: true,
  });
  return files.map((file) => ts.getPreEmitDiagnostics(program, program.getSourceFile(file)).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')));
}

describe('a typed client generated from the published documents', () => {
  it('npx openapi-typescript, then openapi-fetch: tsc accepts the client in strict mode and refuses wrong calls, and it works against the service', async () => {
    await fs.mkdir(OUT, { recursive: true });
    const dir = await fs.mkdtemp(path.join(OUT, 'run-'));
    try {
      // The README's command, once per listener.
      await Promise.all(
        [
          [svc.apiUrl, 'tracking-api.d.ts'],
          [svc.ingestUrl, 'tracking-ingest.d.ts'],
        ].map(([base, file]) => run('npx', ['openapi-typescript', new URL('/openapi/v1.json', base!).href, '-o', path.join(dir, file!)], { cwd: ROOT })),
      );
      const client = path.join(dir, 'client.ts');
      await fs.writeFile(client, CLIENT);
      // The same calls without their @ts-expect-error: tsc refuses each of the four.
      const loose = path.join(dir, 'loose.ts');
      await fs.writeFile(loose, CLIENT.replaceAll('// @ts-expect-error', '//'));
      const [strict, refusals] = diagnosticsOf([client, loose]);
      expect(strict).toEqual([]);
      expect(refusals).toHaveLength(4);

      const { tour } = (await import(pathToFileURL(client).href)) as { tour: (...args: string[]) => Promise<Record<string, unknown>> };
      const result = await tour(svc.apiUrl, svc.ingestUrl, token, scanToken);
      expect(result).toMatchObject({
        location: expect.stringMatching(/^\/api\/v1\/assets\/\d+$/),
        description: 'yard',
        missing: [404, 'not_found'],
        total: 1,
        head: 200,
        accepted: 1,
        visits: ['HALL-1'],
      });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
