import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../shared/service-context.js';

/**
 * One role of the service (`api`, `ingest`, `projector`): what `ROLES` names. A process starts
 * the roles it runs in a fixed order and stops them in reverse, so the api finishes its in-flight
 * commands while the projector they wait for still runs.
 */
export interface Role {
  readonly name: string;
  start(): Promise<void>;
  /** Finishes in-flight work (requests, the batch in flight), then releases what it holds. */
  stop(): Promise<void>;
  /** Base URLs of the listeners it opened, by label, for the start-up banner. */
  urls(): Record<string, string>;
  /** Dependencies of its own that /readyz reports (e.g. Kafka): name → 'ok' or what is wrong. */
  readiness?(): Promise<Record<string, string>>;
  /** Liveness of its own that /healthz reports: name → what is wrong, or nothing while it is alive. */
  liveness?(): Record<string, string>;
}

export type RoleFactory = (ctx: ServiceContext) => Role;

/** The URL a started Fastify listener answers on, as a client should write it. */
export function listenerUrl(app: FastifyInstance, host: string): string {
  const address = app.server.address() as AddressInfo;
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${address.port}`;
}
