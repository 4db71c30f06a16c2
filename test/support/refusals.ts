import { DomainRefusal, type RefusalKind } from '../../shared/domain/refusal.js';

/**
 * The domain's refusals of one kind, as classes for `toBeInstanceOf` and a decider spec's
 * `thenThrows`: `expect(error).toBeInstanceOf(Conflict)` holds for a DomainRefusal whose kind is
 * `conflict`, and for nothing else.
 */
function refusalOfKind(kind: RefusalKind) {
  return class extends DomainRefusal {
    static override [Symbol.hasInstance](value: unknown): boolean {
      return value instanceof DomainRefusal && value.kind === kind;
    }
  };
}

export const BadRequest = refusalOfKind('bad_request');
export const Forbidden = refusalOfKind('forbidden');
export const NotFound = refusalOfKind('not_found');
export const Conflict = refusalOfKind('conflict');
/** Field errors: `fields` lists them. */
export const Invalid = refusalOfKind('invalid');
