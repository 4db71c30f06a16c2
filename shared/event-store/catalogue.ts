import type { z } from 'zod';
import { InvalidEventError, type EventData, type RecordedEvent } from './port.js';

/**
 * The event catalogue: every event type the service writes, with the zod schema of its payload
 * and its schema version. Appends validate against it; an unknown type or a payload that does not
 * match is refused before anything is written.
 */
export interface EventDefinition<S extends z.ZodType = z.ZodType, T extends string = string> {
  type: T;
  version: number;
  schema: S;
}

/** The typed event of a definition (or of a union of them): `{ type: 'AssetCreated'; data: … }`. */
export type EventOf<D> = D extends EventDefinition<infer S, infer T> ? { type: T; data: z.output<S> } : never;

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

  /** Throws InvalidEventError; returns the event with its data as the schema parsed it. */
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
      metadata: { ...event.metadata, schema_version: definition.version },
    };
  }
}

export function defineEvent<T extends string, S extends z.ZodType>(type: T, version: number, schema: S): EventDefinition<S, T> {
  return { type, version, schema };
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
