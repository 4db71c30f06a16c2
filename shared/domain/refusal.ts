import { validationDetail, type FieldError } from '../errors.js';

/**
 * Why a decision refuses a command, in the domain's words: what is refused (`kind`) and, where the
 * refusal is about one input, which (`field`). The edge maps a refusal to its answer once
 * (shared/http/domain-errors.ts for both HTTP pipelines; the CLI prints the message): no decider
 * knows an HTTP status, and no caller tells refusals apart by their message.
 *
 * - `bad_request`: the input cannot be used (a malformed email, a link that is not valid);
 * - `forbidden`: the caller may not do this;
 * - `not_found`: what the command names does not exist (for the caller);
 * - `conflict`: the command collides with the state (a key taken, a cycle, a different body);
 * - `invalid`: the command's fields break their rules: `fields` lists each, in the resource's field order.
 */
export type RefusalKind = 'bad_request' | 'forbidden' | 'not_found' | 'conflict' | 'invalid';

export class DomainRefusal extends Error {
  constructor(
    readonly kind: RefusalKind,
    message: string,
    /** The one input the refusal is about, when it is about one. */
    readonly field?: string,
    /** The field errors of an `invalid` refusal; empty for every other kind. */
    readonly fields: readonly FieldError[] = [],
  ) {
    super(message);
    this.name = 'DomainRefusal';
  }
}

/** The refusals every capability words the same way. */
export const refuse = {
  notFound: (message: string): DomainRefusal => new DomainRefusal('not_found', message),
  conflict: (message: string): DomainRefusal => new DomainRefusal('conflict', message),
  badRequest: (message: string, field?: string): DomainRefusal => new DomainRefusal('bad_request', message, field),
  forbidden: (message: string): DomainRefusal => new DomainRefusal('forbidden', message),
  /** Field errors (at least one): the message is the first one's, and how many more there are. */
  invalid: (fields: readonly FieldError[]): DomainRefusal => new DomainRefusal('invalid', validationDetail([...fields]), undefined, fields),
} as const;
