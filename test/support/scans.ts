import { randomUUID } from 'node:crypto';
import { mintApiKey } from './auth.js';
import type { TestService } from './service.js';

/** A handheld read as POST /ingest/v1/scans takes it. */
export interface HandheldRead {
  tag_type: string;
  value: string;
  observed_at?: string;
  rssi?: number;
}

export interface HandheldReply {
  status: number;
  body: { data?: { accepted: number; unknown: number; duplicate: boolean }; error?: { type: string; detail: string; fields?: Array<{ field: string; code: string }> } };
}

/**
 * Submits handheld scans to a started test service's ingest listener, the way a handheld backend
 * does: real HTTP, a `scans:write` key of the org.
 */
export function handheld(svc: TestService, token: string) {
  return async function submit(body: Record<string, unknown>): Promise<HandheldReply> {
    const response = await fetch(`${svc.ingestUrl}/scans`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as HandheldReply['body'] };
  };
}

/** A `scans:write` key for the org and a function that places reads at a location (by id). */
export async function scanner(svc: TestService, orgId: number) {
  const key = await mintApiKey(svc.service.ctx, { orgId, scopes: ['scans:write'] });
  const submit = handheld(svc, key.token);
  return {
    token: key.token,
    submit,
    /** Reads at one location in one submission; throws unless 202. */
    async scan(location: { id: number } | { external_key: string }, reads: HandheldRead[]) {
      const reply = await submit({ submission_id: randomUUID(), device_id: 'test-handheld', location, reads });
      if (reply.status !== 202) throw new Error(`handheld submission answered ${reply.status}: ${JSON.stringify(reply.body)}`);
      return reply.body.data!;
    },
  };
}
