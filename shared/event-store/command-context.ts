import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Who asked for a command, and in which request: recorded in the metadata of every event the
 * command appends (`metadata.actor`, `metadata.request_id`), so that the audit log
 * (projections/audit, docs/api.md "Audit log") is a projection of the log like every other read.
 *
 * Each pipeline that runs commands sets the context once, around the work it hands to a handler
 * (the public API's route pipeline after authentication, the console's app pipeline after the
 * session is loaded, the CLI around the command it runs); the catalogue stamps it on every event
 * appended inside (catalogue.ts `validate`). No handler passes it by hand, and a handler cannot
 * forget it. Scans are no commands: their handlers append outside any context
 * (`outsideCommandContext`), so a scan event never carries an actor (docs/design.md, "Who did it:
 * actor and request id").
 *
 * Some events also name their actor in their data (`minted_by`, `created_by`…, the domain's
 * `Actor`): those stay as they are; the metadata is the uniform record every event has.
 */

export const ACTOR_TYPES = ['api_key', 'user', 'cli', 'system'] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];

/**
 * An actor as the metadata (and the audit log) names it: an API key (its id and name), a person
 * (their user id, and their email as name), the CLI (`{type: "cli", id: null, name: "cli"}`: whoever
 * can run it holds the database, it has no identity of its own), or the service itself (`system`).
 */
export interface CommandActor {
  type: ActorType;
  id: string | null;
  name: string | null;
}

export const CLI_COMMAND_ACTOR: CommandActor = Object.freeze({ type: 'cli', id: null, name: 'cli' });
export const SYSTEM_COMMAND_ACTOR: CommandActor = Object.freeze({ type: 'system', id: null, name: null });

export interface CommandContext {
  /** null: a request nobody is signed in to (a password-setup or invitation link). */
  actor: CommandActor | null;
  /** The request's `X-Request-ID` (a ULID per run for the CLI). */
  requestId: string | null;
}

const storage = new AsyncLocalStorage<CommandContext>();

/** Runs `work` with every event it appends recording `context`. */
export function runInCommandContext<T>(context: CommandContext, work: () => T): T {
  return storage.run(context, work);
}

/** Runs `work` with no command context, whatever the caller's: for appends that are no commands (scans). */
export function outsideCommandContext<T>(work: () => T): T {
  return storage.exit(work);
}

export function currentCommandContext(): CommandContext | undefined {
  return storage.getStore();
}

/** The metadata members the current context adds to an event (nothing outside a context). */
export function commandMetadata(): { actor?: CommandActor; request_id?: string } {
  const context = storage.getStore();
  if (!context) return {};
  const metadata: { actor?: CommandActor; request_id?: string } = {};
  if (context.actor) metadata.actor = { type: context.actor.type, id: context.actor.id, name: context.actor.name };
  if (context.requestId !== null) metadata.request_id = context.requestId;
  return metadata;
}
