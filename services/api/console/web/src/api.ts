/**
 * The console's two ways to the server, both same-origin: the app's own endpoints (/app/api,
 * cookie session, X-CSRF-Token on state-changing requests; docs/web-app.md) and the public API
 * (/api/v1) with the contract's session token as a Bearer token (docs/api.md).
 */

import type { ApiFieldError } from './messages.js';

/** A person's role in an organization, their member role (docs/web-app.md, "People and roles"). */
export type MemberRole = 'admin' | 'operator' | 'viewer';

export interface Membership {
  org_id: number;
  org_name: string;
  role: MemberRole;
}

export interface Me {
  user: { id: string; email: string };
  memberships: Membership[];
  current_org: { id: number; name: string; role: MemberRole } | null;
  csrf_token: string;
  session_expires_at: string;
}

export type Actor = { kind: 'user'; user_id: string; email: string } | { kind: 'cli' } | null;

export interface Key {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  minted_by: Actor;
  revoked_by: Actor;
}

export interface Member {
  id: string;
  email: string;
  role: MemberRole;
  created_at: string;
  last_sign_in_at: string | null;
  locked: boolean;
  /** `invited` until the person has chosen a password. */
  status: 'invited' | 'active';
}

export interface Reader {
  reader_id: string;
  org_id: number;
  registered_at: string;
}

export interface ScanPoint {
  reader_id: string;
  capture_point: string;
  location_id: number;
  location_external_key: string | null;
}

/** Why a read placed nothing (docs/scan-ingestion.md, "Reads that placed nothing"). */
export type UnknownCause = 'unknown_tag' | 'retired_tag' | 'location_tag' | 'unknown_location' | 'unassigned_capture_point' | 'unknown_reader';

export interface UnknownRead {
  cause: UnknownCause;
  reader_id: string | null;
  capture_point: string | null;
  tag_type: string | null;
  value: string | null;
  count: number;
  first_seen: string;
  last_seen: string;
  attached_to: { owner_type: 'asset' | 'location'; id: number; external_key: string | null } | null;
}

/** One read of the live stream (`event: read`, docs/web-app.md "Live reads"). */
export interface LiveRead {
  source: 'fixed' | 'handheld';
  reader_id: string | null;
  capture_point: string | null;
  device_id: string | null;
  tag_type: string;
  value: string;
  asset: { id: number; external_key: string | null } | null;
  location: { id: number; external_key: string | null } | null;
  cause: UnknownCause | null;
  observed_at: string;
  rssi: number | null;
  recorded_at: string;
}

/** The webhook event types (docs/api.md "Webhooks", "The events"). */
export const WEBHOOK_EVENT_TYPES = ['asset.first_seen', 'asset.moved', 'asset.not_seen', 'asset.seen_again', 'alert.raised', 'alert.resolved'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** A webhook endpoint as `/api/v1/webhook-endpoints` shows it; `secret` only in the answer of a create or a rotation. */
export interface WebhookEndpoint {
  id: number;
  url: string;
  description: string | null;
  event_types: WebhookEventType[];
  is_active: boolean;
  disabled_reason: string | null;
  not_seen_after_seconds: number;
  created_at: string;
  updated_at: string;
  secret?: string;
}

/** One attempt to send an event to an endpoint. */
export interface WebhookDelivery {
  id: number;
  webhook_id: string;
  event_type: WebhookEventType;
  attempt: number;
  status: 'pending' | 'succeeded' | 'failed';
  response_status: number | null;
  duration_ms: number | null;
  error: string | null;
  next_attempt_at: string | null;
  created_at: string;
}

/** Who asked for a change, as the audit log names them (docs/api.md "Audit log"). */
export type AuditActorType = 'api_key' | 'user' | 'cli' | 'system';

/** An entry of `/api/v1/audit-events`. */
export interface AuditEvent {
  id: string;
  occurred_at: string;
  action: string;
  resource_type: string;
  resource_id: string;
  resource_external_key: string | null;
  actor: { type: AuditActorType; id: string | null; name: string | null };
  request_id: string | null;
  changes: Record<string, { from: unknown; to: unknown }> | null;
}

/** What an import's rows are (docs/api.md "Import"). */
/** An alert rule and an alert as the public API answers them (docs/api.md "Alerts"). */
export interface AlertRule {
  id: number;
  name: string;
  kind: 'entered' | 'left' | 'dwell_exceeded' | 'not_seen';
  location_id: number;
  location_external_key: string | null;
  threshold_seconds: number | null;
  asset_ids: number[] | null;
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

export interface AlertItem {
  id: string;
  rule_id: number;
  kind: AlertRule['kind'];
  asset_id: number;
  asset_external_key: string | null;
  location_id: number;
  location_external_key: string | null;
  raised_at: string;
  status: 'open' | 'acknowledged' | 'resolved';
  acknowledged_at: string | null;
  acknowledged_by: { type: string; id: string | null; name: string | null } | null;
  resolved_at: string | null;
}

export type ImportResource = 'assets' | 'locations';

/** One refused row of an import: the row (from 1 after the header), the column, the API's code and sentence. */
export interface ImportRowError {
  row: number;
  field: string;
  code: string;
  message: string;
}

/** A background import job, as `GET /api/v1/imports/{id}` shows it. */
export interface ImportJob {
  id: number;
  resource: ImportResource;
  status: 'queued' | 'running' | 'succeeded' | 'failed';
  dry_run: boolean;
  rows: number;
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  errors: ImportRowError[];
  created_at: string;
  finished_at: string | null;
}

export interface ListPage<T> {
  data: T[];
  limit: number;
  offset: number;
  total_count: number;
}

/** A refusal, with the contract's error envelope where the server sent one. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly fields: ApiFieldError[] = [],
  ) {
    super(message);
  }
}

let csrfToken: string | null = null;

export function rememberCsrf(token: string | null): void {
  csrfToken = token;
}

async function failureOf(response: Response): Promise<ApiFailure> {
  const body = (await response.json().catch(() => null)) as { error?: { detail?: string; fields?: ApiFieldError[] } } | null;
  return new ApiFailure(response.status, body?.error?.detail ?? `${response.status} ${response.statusText}`, body?.error?.fields ?? []);
}

/** One call of /app/api: JSON in and out, the CSRF header on anything but GET. */
export async function app<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  const response = await fetch(`/app/api${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  if (!response.ok) throw await failureOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

let sessionToken: { token: string; renewAt: number; orgId: number | null } | null = null;

/** Forgets the session token (sign-out, another organization). */
export function forgetSessionToken(): void {
  sessionToken = null;
}

async function bearer(): Promise<string> {
  if (!sessionToken || Date.now() >= sessionToken.renewAt) {
    const { data } = await app<{ data: { token: string; expires_at: string; org_id: number | null } }>('POST', '/session-token');
    // Renewed a few minutes before it expires.
    sessionToken = { token: data.token, renewAt: Date.parse(data.expires_at) - 5 * 60_000, orgId: data.org_id };
  }
  return sessionToken.token;
}

/** A GET of the public API (/api/v1) with the session token; `query` values that are empty are left out, a list is a repeated parameter. */
export async function publicApi<T>(path: string, query: Record<string, string | number | string[] | undefined> = {}): Promise<T> {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined && one !== '') params.append(name, String(one));
  }
  return publicCall<T>('GET', `${path}${params.size > 0 ? `?${params}` : ''}`);
}

/** The files a list exports (docs/api.md "Export"). */
export const EXPORT_FORMATS = {
  csv: 'text/csv',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
} as const;

/**
 * A list of the public API as a file, with the session token and the list's filters (its `limit`
 * and `offset` mean nothing to an export and are left out), saved through a link to a blob.
 */
export async function publicDownload(path: string, query: Record<string, string | number | undefined>, format: keyof typeof EXPORT_FORMATS): Promise<void> {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== '' && name !== 'limit' && name !== 'offset') params.set(name, String(value));
  const send = async () => fetch(`/api/v1${path}${params.size > 0 ? `?${params}` : ''}`, { headers: { authorization: `Bearer ${await bearer()}`, accept: EXPORT_FORMATS[format] } });
  let response = await send();
  if (response.status === 401) {
    forgetSessionToken();
    response = await send();
  }
  if (!response.ok) throw await failureOf(response);
  const name = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') ?? '')?.[1] ?? `export.${format}`;
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * A file posted to the public API as it is (an import's CSV or XLSX, docs/api.md "Import"), with
 * its type as the Content-Type; the answer's JSON out.
 */
export function publicUpload<T>(pathAndQuery: string, file: Blob, contentType: string): Promise<T> {
  return publicCall<T>('POST', pathAndQuery, undefined, { body: file, contentType });
}

/** A write of the public API (/api/v1) with the session token: JSON in, the answer's JSON out. */
export function publicApiWrite<T>(method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  return publicCall<T>(method, path, body);
}

async function publicCall<T>(method: string, pathAndQuery: string, body?: unknown, raw?: { body: Blob; contentType: string }): Promise<T> {
  const send = async () => {
    const headers: Record<string, string> = { authorization: `Bearer ${await bearer()}`, accept: 'application/json' };
    // A PATCH of the public API is a JSON merge patch (docs/api.md), and says so.
    if (body !== undefined) headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    if (raw) headers['content-type'] = raw.contentType;
    return fetch(`/api/v1${pathAndQuery}`, { method, headers, body: raw ? raw.body : body === undefined ? undefined : JSON.stringify(body) });
  };
  let response = await send();
  if (response.status === 401) {
    // The token ended (a member role change, a password change): the cookie session goes on, so a new
    // token, with the person's role of now, is fetched once (docs/web-app.md, "Session tokens").
    forgetSessionToken();
    response = await send();
  }
  if (!response.ok) throw await failureOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/**
 * The names of records by their keys, in one request per kind (the list's repeatable
 * `external_key`, docs/api.md "Lists: paging, sorting, filters, search"), deleted ones included: what a page shows first, the key
 * beside it (docs/console.md, "Names first").
 */
export async function namesByKey(kind: 'assets' | 'locations', keys: Array<string | null | undefined>): Promise<Map<string, string>> {
  const wanted = [...new Set(keys.filter((key): key is string => typeof key === 'string' && key !== ''))];
  const names = new Map<string, string>();
  // At most 200 a page, the list's limit; a page of the console shows fewer.
  for (let start = 0; start < wanted.length; start += 200) {
    const slice = wanted.slice(start, start + 200);
    const page = await publicApi<ListPage<{ external_key: string; name: string }>>(`/${kind}`, { external_key: slice, include_deleted: 'true', limit: 200 });
    for (const row of page.data) names.set(row.external_key, row.name);
  }
  return names;
}
