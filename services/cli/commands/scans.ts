import { orgIdOption } from '../options.js';
import type { Pool } from '../../../shared/db/pool.js';
import { CliUsageError, type CliContext, type CommandInput, type CommandModule } from '../registry.js';

const UNKNOWN_COLUMNS = ['cause', 'reader_id', 'capture_point', 'tag_type', 'value', 'count', 'first_seen', 'last_seen'];
const DEAD_LETTER_COLUMNS = ['id', 'topic', 'reason', 'received_at', 'payload_preview'];

/** The pool, and the organization of `--org` (which must exist) or null without it. */
async function optionalOrg(input: CommandInput, ctx: CliContext): Promise<{ pool: Pool; orgId: number | null }> {
  const orgId = input.options.org === undefined ? null : orgIdOption(input);
  const pool = await ctx.pool();
  if (orgId !== null) {
    const { findOrg } = await import('../../../projections/orgs-and-keys/queries.js');
    if (!(await findOrg(pool, orgId))) throw new CliUsageError(`no organization ${orgId}`);
  }
  return { pool, orgId };
}

/** Scans that placed nothing, for an operator to find the tags and readers to register. */
export default {
  groups: { scans: 'scans that placed nothing, by cause; reader messages kept as dead letters' },
  commands: [
    {
      path: ['scans', 'unknown'],
      summary: 'reads that placed nothing, by cause, largest count first',
      description:
        'Causes: unknown_tag, retired_tag, location_tag, unknown_location, unassigned_capture_point, unknown_reader. Without --org: the reads of readers no organization has registered.',
      options: [{ flags: '--org <org-id>', description: 'the organization' }],
      examples: ['npx tracking scans unknown --org 1', 'npx tracking scans unknown --org 1 --json', 'npx tracking scans unknown'],
      async run(input, ctx) {
        const { pool, orgId } = await optionalOrg(input, ctx);
        const [{ listUnknownReads }, { NO_ORG }] = await Promise.all([import('../../../projections/tracking/queries.js'), import('../../../shared/domain/scans/events.js')]);
        ctx.out.print(await listUnknownReads(pool, orgId ?? NO_ORG), UNKNOWN_COLUMNS);
      },
    },
    {
      path: ['scans', 'dead-letters'],
      summary: 'fixed-reader messages received over MQTT that are not JSON or match neither shape, newest first',
      description:
        'Each with the topic it came from, why it was refused, when it arrived and the start of its payload. With --org: those whose payload names a reader of that organization; without: all of them.',
      options: [{ flags: '--org <org-id>', description: 'the organization' }],
      examples: ['npx tracking scans dead-letters', 'npx tracking scans dead-letters --json', 'npx tracking scans dead-letters --org 1'],
      async run(input, ctx) {
        const { pool, orgId } = await optionalOrg(input, ctx);
        const { listDeadLetters } = await import('../../../projections/readers/queries.js');
        ctx.out.print(await listDeadLetters(pool, orgId), DEAD_LETTER_COLUMNS);
      },
    },
  ],
} satisfies CommandModule;
