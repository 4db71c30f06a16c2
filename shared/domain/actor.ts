import { z } from 'zod';

/**
 * Who made a change, as the events that record it name them: a person signed in to the web
 * application (their user id and email at the time), or an operator at the CLI (which has no
 * identity of its own: whoever can run it holds the database).
 */
export const actorSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('user'), user_id: z.string().min(1), email: z.string().min(1) }),
  z.object({ kind: z.literal('cli') }),
]);

export type Actor = z.output<typeof actorSchema>;

export const CLI_ACTOR: Actor = { kind: 'cli' };
