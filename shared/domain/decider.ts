import type { EventDefinition, EventOf } from '../event-store/catalogue.js';
import type { RecordedEvent } from '../event-store/port.js';

/**
 * The one shape of every aggregate (Emmett's decider): `decide(command, state)` returns the events
 * a command produces, or throws a domain error; `evolve(state, event)` folds one event into the
 * state; `initialState` is the state of a stream with no events. All three are pure: what a
 * decision needs from outside its own stream (another stream's reservation, a read model's answer,
 * the clock, a fresh id) is read by the command handler and passed in on the command.
 */
export interface Decider<State, Command, Event> {
  initialState: State;
  evolve(state: State, event: Event): State;
  decide(command: Command, state: State): Event[];
}

/** The state after `events`, from the initial state. */
export function fold<State, Event>(decider: Pick<Decider<State, never, Event>, 'initialState' | 'evolve'>, events: readonly Event[]): State {
  return events.reduce(decider.evolve, decider.initialState);
}

/**
 * A stream's recorded events as the typed events of `definitions`; events of other types are left
 * out. The catalogue validated every payload against these schemas at append, which is what makes
 * the typing sound.
 */
export function eventsOf<D extends EventDefinition>(recorded: readonly RecordedEvent[], definitions: readonly D[]): Array<EventOf<D>> {
  const types = new Set<string>(definitions.map((d) => d.type));
  return recorded.filter((e) => types.has(e.type)).map((e) => ({ type: e.type, data: e.data }) as EventOf<D>);
}
