import type { ErrorObject, ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'vitest';

/**
 * The contract guard of the test suite. Every response a test receives through `fetch` from a
 * guarded service (the public API and the ingest listener of each startTestService) is checked
 * against the OpenAPI document that same service publishes: the status must be one its
 * operation lists, every documented header must be there and match its schema, and the body
 * must match the schema of that status (ajv, JSON Schema 2020-12, with ajv-formats). A response
 * that does not match fails the test that received it (the setup file's afterEach).
 *
 * Cheap on purpose: a document is fetched once per service and its validators are compiled the
 * first time a response needs them, once per document text.
 */

type Json = Record<string, unknown>;

// ajv-formats is CommonJS with its function as the default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'] as const;

/** What the guard looks at in a response. */
export interface ObservedResponse {
  status: number;
  headers: Headers;
  /** The body text ('' when there is none). */
  body: string;
}

interface PathMatcher {
  template: string;
  pattern: RegExp;
  item: Json;
}

/** One published document, ready to check responses of its listener. */
export class Contract {
  private readonly ajv: Ajv2020;
  /** By pointer in the document, and by schema text. */
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly matchers: PathMatcher[];
  /** The listener's prefix (the document's server URL), e.g. `/api/v1`. */
  readonly prefix: string;

  constructor(readonly document: Json) {
    const servers = document.servers as Array<{ url: string }> | undefined;
    this.prefix = servers?.[0]?.url ?? '';
    this.ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
    addFormats(this.ajv);
    this.ajv.addKeyword({ keyword: 'x-extensible-enum', schemaType: 'boolean' });
    const components = (document.components ?? {}) as { schemas?: Json };
    this.ajv.addSchema({ $id: 'components', $defs: rewriteRefs(components.schemas ?? {}) });
    // Static paths before templated ones, as the router prefers them.
    this.matchers = Object.entries(document.paths as Record<string, Json>)
      .map(([template, item]) => ({
        template,
        item,
        pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
      }))
      .sort((a, b) => (a.template.match(/\{/g)?.length ?? 0) - (b.template.match(/\{/g)?.length ?? 0));
  }

  /** Where `response` departs from the document, for a request of `method` to `pathname` (the URL's path). */
  check(method: string, pathname: string, response: ObservedResponse): string[] {
    if (pathname !== this.prefix && !pathname.startsWith(`${this.prefix}/`)) return [`${pathname} is not under ${this.prefix}`];
    const path = pathname.slice(this.prefix.length);
    const matcher = this.matchers.find((m) => m.pattern.test(path));
    if (!matcher) return this.checkAgainst('#/components/responses/UnknownRoute', 404, method, response);
    const verb = method.toLowerCase();
    if (verb === 'options') {
      return [...this.checkAgainst('#/components/responses/Options', 204, method, response), ...this.checkAllow(matcher, response)];
    }
    const operation = (METHODS as readonly string[]).includes(verb) ? (matcher.item[verb] as Json | undefined) : undefined;
    if (!operation) {
      return [...this.checkAgainst('#/components/responses/MethodNotAllowed', 405, method, response), ...this.checkAllow(matcher, response)];
    }
    const pointer = `#/paths/${escapePointer(matcher.template)}/${verb}/responses/${response.status}`;
    const responses = operation.responses as Json;
    if (!(String(response.status) in responses)) {
      return [`status ${response.status} is not documented for ${verb} ${matcher.template} (documented: ${Object.keys(responses).join(', ')})`];
    }
    return this.checkResponse(pointer, method, response);
  }

  private checkAgainst(pointer: string, status: number, method: string, response: ObservedResponse): string[] {
    if (response.status !== status) return [`status ${response.status}, but ${pointer} is ${status}`];
    return this.checkResponse(pointer, method, response);
  }

  /** Allow lists the methods the path declares (HEAD wherever GET). */
  private checkAllow(matcher: PathMatcher, response: ObservedResponse): string[] {
    const allow = response.headers.get('allow');
    if (allow === null) return [];
    const declared = METHODS.filter((m) => m in matcher.item).map((m) => m.toUpperCase());
    const sent = allow.split(',').map((m) => m.trim());
    return [...sent].sort().join() === [...declared].sort().join() ? [] : [`Allow: ${allow}, but ${matcher.template} declares ${declared.join(', ')}`];
  }

  private checkResponse(pointer: string, method: string, response: ObservedResponse): string[] {
    const documented = this.resolve(pointer);
    const problems: string[] = [];
    for (const [name, ref] of Object.entries((documented.headers ?? {}) as Record<string, Json>)) {
      const header = typeof ref.$ref === 'string' ? this.resolve(ref.$ref) : ref;
      const value = response.headers.get(name);
      if (value === null) {
        if (header.required === true) problems.push(`header ${name} is missing`);
        continue;
      }
      const schema = header.schema as Json;
      const validate = this.validator(`${pointer}/headers/${escapePointer(name)}`, schema);
      const typed = schema.type === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value;
      if (!validate(typed)) problems.push(`header ${name}: ${describe(validate.errors, name)} (${JSON.stringify(value)})`);
    }
    const content = documented.content as Record<string, { schema: Json }> | undefined;
    if (method.toUpperCase() === 'HEAD' || !content) {
      if (response.body !== '') problems.push(`a body where the document has none: ${response.body.slice(0, 200)}`);
      return problems;
    }
    const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const media = content[mediaType];
    if (!media) return [...problems, `Content-Type ${mediaType || '(none)'}, but the document has ${Object.keys(content).join(', ')}`];
    // A file (an export's CSV or XLSX): its media type is documented; its rows are the export tests'.
    if (!/^application\/(.+\+)?json$/.test(mediaType)) return problems;
    let body: unknown;
    try {
      body = JSON.parse(response.body);
    } catch {
      return [...problems, `a body that is not JSON: ${response.body.slice(0, 200)}`];
    }
    const validate = this.validator(`${pointer}/content/${escapePointer(mediaType)}/schema`, media.schema);
    if (!validate(body)) problems.push(`body: ${describe(validate.errors, 'body')}`);
    return problems;
  }

  /** The validator of the schema at `pointer`: compiled once per distinct schema (a view recurs in many responses). */
  private validator(pointer: string, schema: Json): ValidateFunction {
    let validate = this.validators.get(pointer);
    if (!validate) {
      const text = JSON.stringify(schema);
      validate = this.validators.get(text) ?? this.ajv.compile(rewriteRefs(schema));
      this.validators.set(text, validate);
      this.validators.set(pointer, validate);
    }
    return validate;
  }

  private resolve(pointer: string): Json {
    let node: unknown = this.document;
    for (const part of pointer.replace(/^#\//, '').split('/')) {
      node = (node as Json | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    if (node === undefined || node === null) throw new Error(`the document has nothing at ${pointer}`);
    return node as Json;
  }
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The document's `#/components/schemas/X` refs, as refs into the `components` schema ajv holds. */
function rewriteRefs<T>(value: T): T {
  if (Array.isArray(value)) return value.map(rewriteRefs) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] = key === '$ref' && typeof inner === 'string' ? inner.replace('#/components/schemas/', 'components#/$defs/') : rewriteRefs(inner);
  }
  return out as T;
}

function describe(errors: ErrorObject[] | null | undefined, dataVar: string): string {
  return (errors ?? [])
    .map((e) => `${dataVar}${e.instancePath} ${e.message}${e.keyword === 'additionalProperties' ? ` (${String(e.params.additionalProperty)})` : ''}`)
    .join('; ');
}

// Compiled contracts by document text: every service of a test file publishes the same one.
const contracts = new Map<string, Contract>();

/** The contract of a document (compiled once per document text). */
export function contractOf(documentText: string): Contract {
  let contract = contracts.get(documentText);
  if (!contract) {
    contract = new Contract(JSON.parse(documentText) as Json);
    contracts.set(documentText, contract);
  }
  return contract;
}

// The fetch the guard wraps, for its own requests.
const unguardedFetch: typeof fetch = globalThis.fetch;

/** Guarded listeners: the base URL (`http://127.0.0.1:41234/api/v1`) and its contract. */
const guarded = new Map<string, Contract>();
let failures: string[] = [];
let checked = 0;

/**
 * Guards the responses of a listener from now on: `baseUrl` is where its operations live
 * (`…/api/v1`), `documentUrl` where it publishes its document.
 */
export async function guardResponses(baseUrl: string, documentUrl: string): Promise<void> {
  const response = await unguardedFetch(documentUrl);
  if (response.status !== 200) throw new Error(`the contract guard could not read ${documentUrl}: ${response.status}`);
  guarded.set(baseUrl, contractOf(await response.text()));
}

/** Stops guarding a listener (its service stopped; another may take its port). */
export function unguardResponses(baseUrl: string): void {
  guarded.delete(baseUrl);
}

function guardedContract(url: URL): Contract | null {
  const href = `${url.origin}${url.pathname}`;
  for (const [base, contract] of guarded) {
    if (href === base || href.startsWith(`${base}/`)) return contract;
  }
  return null;
}

type FetchInput = Parameters<typeof fetch>[0];

// fetch sends these methods upper-cased whatever their case; any other as written.
const NORMALIZED_METHODS = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT']);

function methodOf(input: FetchInput, init: RequestInit | undefined): string {
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
  return NORMALIZED_METHODS.has(method.toUpperCase()) ? method.toUpperCase() : method;
}

/** Checks one response of a guarded listener; returns the failures recorded (for this response). */
export function recordResponse(method: string, url: URL, response: ObservedResponse): string[] {
  const contract = guardedContract(url);
  if (!contract) return [];
  checked++;
  const problems = contract.check(method, url.pathname, response);
  if (problems.length === 0) return [];
  const test = expect.getState().currentTestName ?? '(outside a test)';
  const failure = `${method} ${url.pathname}${url.search} → ${response.status} does not match the OpenAPI document [${test}]:\n  - ${problems.join('\n  - ')}`;
  failures.push(failure);
  return [failure];
}

/** Wraps globalThis.fetch so that every response of a guarded listener is checked. Idempotent. */
export function installGuard(): void {
  if ((globalThis.fetch as { contractGuard?: boolean }).contractGuard) return;
  const guardedFetch = async (input: FetchInput, init?: RequestInit): Promise<Response> => {
    const response = await unguardedFetch(input, init);
    const url = new URL(response.url || (input instanceof Request ? input.url : String(input)));
    if (guardedContract(url)) {
      const body = await response.clone().text();
      recordResponse(methodOf(input, init), url, { status: response.status, headers: response.headers, body });
    }
    return response;
  };
  globalThis.fetch = Object.assign(guardedFetch, { contractGuard: true });
}

/** Whether globalThis.fetch is the guard's. */
export function guardInstalled(): boolean {
  return (globalThis.fetch as { contractGuard?: boolean }).contractGuard === true;
}

/** The failures recorded so far, cleared. */
export function takeFailures(): string[] {
  const taken = failures;
  failures = [];
  return taken;
}

/** How many responses the guard has checked in this test file. */
export function checkedResponses(): number {
  return checked;
}

/** Throws the recorded failures (and clears them): the setup file's afterEach and afterAll. */
export function assertNoFailures(): void {
  const taken = takeFailures();
  if (taken.length > 0) {
    throw new Error(`${taken.length} response(s) did not match the published OpenAPI document:\n${taken.join('\n')}`);
  }
}
