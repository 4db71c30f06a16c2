import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, type TestService } from '../support/service.js';
import type { Json } from '../people/app-client.js';

/** What the audit log's tests share: its entry as the API answers it, a call of the list, the CLI. */

export interface AuditEntry {
  id: string;
  occurred_at: string;
  action: string;
  resource_type: string;
  resource_id: string;
  resource_external_key: string | null;
  actor: { type: string; id: string | null; name: string | null };
  request_id: string | null;
  changes: Record<string, { from: unknown; to: unknown }> | null;
}

export interface AuditPage {
  data: AuditEntry[];
  limit: number;
  offset: number;
  total_count: number;
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

/** `GET /audit-events` with a token and query; the status and the body. */
export async function auditEvents(svc: TestService, token: string, query: Record<string, string | number> = {}): Promise<{ status: number; body: Json }> {
  const params = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
  const response = await fetch(`${svc.apiUrl}/audit-events${params.size > 0 ? `?${params}` : ''}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: await response.json() };
}

/** The whole audit log of the token's organization, newest first (every page). */
export async function wholeAuditLog(svc: TestService, token: string, query: Record<string, string> = {}): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  for (let offset = 0; ; offset += 200) {
    const { status, body } = await auditEvents(svc, token, { ...query, limit: 200, offset });
    if (status !== 200) throw new Error(`GET /audit-events answered ${status}: ${JSON.stringify(body)}`);
    const page = body as AuditPage;
    entries.push(...page.data);
    if (entries.length >= page.total_count || page.data.length === 0) return entries;
  }
}

/** The CLI (`npx tracking … --json`) against the test service's database, its JSON answer. */
export function cliJson(svc: TestService, ...args: string[]): Promise<Json> {
  return new Promise((resolve, reject) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args, '--json'],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          DATABASE_URL: svc.db.url,
          SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
          PUBLIC_URL: new URL(svc.apiUrl).origin,
          LOG_LEVEL: 'warn',
          NODE_NO_WARNINGS: '1',
        },
        timeout: 60_000,
      },
      (error, stdout, stderr) => (error ? reject(new Error(`${args.join(' ')}: ${stderr}`)) : resolve(JSON.parse(stdout))),
    );
  });
}
