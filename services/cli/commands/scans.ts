import { orgIdOption } from '../options.js';
import { CliUsageError, type CommandModule } from '../registry.js';

const UNKNOWN_COLUMNS = ['cause', 'reader_id', 'capture_point', 'tag_type', 'value', 'count', 'first_seen', 'last_seen'];

/** Scans that placed nothing, for an operator to find the tags and readers to register. */
export default {
  groups: { scans: 'scans that placed nothing, by cause' },
  commands: [
    {
      path: ['scans', 'unknown'],
      summary: 'reads that placed nothing, by cause, largest count first',
      description:
        'Causes: unknown_tag, retired_tag, location_tag, unknown_location, unassigned_capture_point, unknown_reader. Without --org: the reads of readers no organization has registered.',
      options: [{ flags: '--org <org-id>', description: 'the organization' }],
      examples: ['npx tracking scans unknown --org 1', 'npx tracking scans unknown --org 1 --json', 'npx tracking scans unknown'],
      async run(input, ctx) {
        const orgId = input.options.org === undefined ? null : orgIdOption(input);
        const pool = await ctx.pool();
        const [{ listUnknownReads }, { NO_ORG }] = await Promise.all([import('../../../projections/tracking/queries.js'), import('../../../shared/domain/scans/events.js')]);
        if (orgId !== null) {
          const { findOrg } = await import('../../../projections/orgs-and-keys/queries.js');
          if (!(await findOrg(pool, orgId))) throw new CliUsageError(`no organization ${orgId}`);
        }
        ctx.out.print(await listUnknownReads(pool, orgId ?? NO_ORG), UNKNOWN_COLUMNS);
      },
    },
  ],
} satisfies CommandModule;
