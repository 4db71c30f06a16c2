import { z } from 'zod';
import { InvalidEventError, type EventData, type RecordedEvent } from './port.js';
import { commandMetadata } from './command-context.js';

/**
 * The event catalogue: every event type the service writes, with the zod schema of its payload
 * and its schema version. Appends validate against it; an unknown type or a payload that does not
 * match is refused before anything is written.
 *
 * A type whose payload changes gets a new version: appends are validated against (and stamped
 * with, `metadata.schema_version`) the current one only, while readers (deciders, projections)
 * are typed with every version a log may still hold (`earlier`). Nothing is upcast: an event stays
 * as it was written, and its readers handle each version.
 */
export interface EventDefinition<S extends z.ZodType = z.ZodType, T extends string = string, R extends z.ZodType = S> {
  type: T;
  /** The version of `schema`, the one every append is stamped with. */
  version: number;
  /** The current payload: what appends are validated against. */
  schema: S;
  /** The payloads of earlier versions, which logs written before `version` may hold; never appended. */
  earlier: ReadonlyArray<{ version: number; schema: z.ZodType }>;
  /** Any payload a reader may meet: the current one or an earlier one (typing only). */
  readSchema: R;
}

/** The typed event of a definition (or of a union of them) as read: `{ type: 'AssetCreated'; data: … }`, every version a log may hold. */
export type EventOf<D> = D extends EventDefinition<z.ZodType, infer T, infer R> ? { type: T; data: z.output<R> } : never;

/** The typed event of a definition as appended: its current version only. */
export type NewEventOf<D> = D extends EventDefinition<infer S, infer T, z.ZodType> ? { type: T; data: z.output<S> } : never;

export class EventCatalogue {
  private readonly definitions = new Map<string, EventDefinition>();

  register(...definitions: EventDefinition[]): this {
    for (const definition of definitions) {
      if (this.definitions.has(definition.type)) throw new Error(`event type registered twice: ${definition.type}`);
      this.definitions.set(definition.type, definition);
    }
    return this;
  }

  has(type: string): boolean {
    return this.definitions.has(type);
  }

  /** Every registered event type, in registration order. */
  types(): string[] {
    return [...this.definitions.keys()];
  }

  /**
   * Throws InvalidEventError; returns the event with its data as the schema parsed it, and its
   * metadata stamped with the schema version and, inside a command, who asked and the request id
   * (command-context.ts): every adapter validates each event it appends here, so this is the one
   * place every append passes.
   */
  validate(event: EventData): EventData {
    const definition = this.definitions.get(event.type);
    if (!definition) throw new InvalidEventError(event.type, 'unknown event type');
    const parsed = definition.schema.safeParse(event.data);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new InvalidEventError(event.type, `${issue.path.join('.') || '(root)'}: ${issue.message}`);
    }
    return {
      ...event,
      data: parsed.data as EventData['data'],
      metadata: { ...commandMetadata(), ...event.metadata, schema_version: definition.version },
    };
  }
}

export function defineEvent<T extends string, S extends z.ZodType>(type: T, version: number, schema: S): EventDefinition<S, T>;
/** A type at `version` whose earlier version `earlier.version` (with its payload `earlier.schema`) logs may still hold. */
export function defineEvent<T extends string, S extends z.ZodType, E extends z.ZodType>(
  type: T,
  version: number,
  schema: S,
  earlier: { version: number; schema: E },
): EventDefinition<S, T, z.ZodUnion<[S, E]>>;
export function defineEvent(type: string, version: number, schema: z.ZodType, earlier?: { version: number; schema: z.ZodType }): EventDefinition {
  if (earlier && earlier.version >= version) throw new Error(`event type ${type}: an earlier version (${earlier.version}) must be below ${version}`);
  return { type, version, schema, earlier: earlier ? [earlier] : [], readSchema: earlier ? z.union([schema, earlier.schema]) : schema };
}

/**
 * Recorded events as the typed events of `definitions` (a stream as its decider folds it, a batch
 * as a projection applies it); events of other types are left out, the order is kept. The
 * catalogue validated every payload against these schemas at append, which makes the typing sound.
 */
export function eventsOf<D extends EventDefinition>(recorded: readonly RecordedEvent[], definitions: readonly D[]): Array<EventOf<D>> {
  const types = new Set<string>(definitions.map((d) => d.type));
  return recorded.filter((e) => types.has(e.type)).map((e) => ({ type: e.type, data: e.data }) as EventOf<D>);
}

/** As `eventsOf`, each with the revision of its stream it was recorded at. */
export function eventsWithRevisionOf<D extends EventDefinition>(recorded: readonly RecordedEvent[], definitions: readonly D[]): Array<EventOf<D> & { revision: bigint }> {
  const types = new Set<string>(definitions.map((d) => d.type));
  return recorded.filter((e) => types.has(e.type)).map((e) => ({ type: e.type, data: e.data, revision: e.revision }) as EventOf<D> & { revision: bigint });
}
