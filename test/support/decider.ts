import { expect } from 'vitest';
import { fold, type Decider } from '../../shared/domain/decider.js';

/**
 * The given/when/then of every decider test, with no I/O:
 *
 *   const given = specFor(locationDecider);
 *   given([created]).when({ type: 'RenameLocation', … }).then([renamed]);
 *   given([]).when(command).thenThrows(Conflict, (e) => expect(e.message).toContain('…'));
 *   given([]).when(command).thenThrows((e) => expect(e).toBeInstanceOf(Invalid));   // refusals.ts
 */

type ErrorClass<T extends Error> = abstract new (...args: never[]) => T;

export function specFor<State, Command, Event>(decider: Decider<State, Command, Event>) {
  return function given(events: readonly Event[]) {
    const state = fold(decider, events);
    return {
      when(command: Command) {
        const decide = () => decider.decide(command, state);
        return {
          /** The events the command produces (none for a no-op). */
          then(expected: readonly Event[]): void {
            expect(decide()).toEqual(expected);
          },
          /** The command is refused: with an error of this class (then `check`ed), or one `check` accepts. */
          thenThrows<T extends Error>(expected: ErrorClass<T> | ((error: Error) => void), check?: (error: T) => void): void {
            let thrown: unknown = undefined;
            let events: Event[] | undefined;
            try {
              events = decide();
            } catch (error) {
              thrown = error;
            }
            expect(events, 'the command was accepted').toBeUndefined();
            expect(thrown).toBeInstanceOf(Error);
            if (isErrorClass(expected)) {
              expect(thrown).toBeInstanceOf(expected);
              check?.(thrown as T);
            } else {
              expected(thrown as Error);
            }
          },
        };
      },
    };
  };
}

function isErrorClass<T extends Error>(value: ErrorClass<T> | ((error: Error) => void)): value is ErrorClass<T> {
  return (value as unknown) === Error || value.prototype instanceof Error;
}
