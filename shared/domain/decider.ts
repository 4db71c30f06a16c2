/**
 * The one shape of every aggregate (Emmett's decider): `decide(command, state)` returns the events
 * a command produces, or throws a domain error; `evolve(state, event)` folds one event into the
 * state; `initialState` is the state of a stream with no events. All three are pure: what a
 * decision needs from outside its own stream (another stream's reservation, a read model's answer,
 * the clock, a fresh id) is read by the command handler and passed in on the command.
 */
export interface Decider<State, Command, Event, Decided extends Event = Event> {
  initialState: State;
  evolve(state: State, event: Event): State;
  /** `Decided`: the events as appended now, when `evolve` also folds earlier versions a log may hold. */
  decide(command: Command, state: State): Decided[];
}

/** The state after `events`, from the initial state. */
export function fold<State, Event>(decider: Pick<Decider<State, never, Event>, 'initialState' | 'evolve'>, events: readonly Event[]): State {
  return events.reduce(decider.evolve, decider.initialState);
}
