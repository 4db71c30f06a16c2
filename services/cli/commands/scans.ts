import { findOrg } from '../../../projections/orgs-and-keys/queries.js';
import { listUnknownReads } from '../../../projections/tracking/queries.js';
import { isFieldError, parseId } from '../../../shared/http/validation.js';
import { CliUsageError, requireOption, type CliCommand } from '../command.js';

const UNKNOWN_COLUMNS = ['cause', 'reader_id', 'capture_point', 'tag_type', 'value', 'count', 'first_seen', 'last_seen'];

/** Scans that placed nothing, for an operator to find the tags and readers to register. */
export const scanCommands: CliCommand[] = [
  {
    path: ['scans', 'unknown'],
    usage: 'scans unknown --org <org-id>',
    options: ['org'],
    async run(ctx, options) {
      const orgId = parseId('--org', requireOption(options, 'org'));
      if (isFieldError(orgId)) throw new CliUsageError(orgId.message);
      if (!(await findOrg(ctx.pool, orgId))) throw new CliUsageError(`no organization ${orgId}`);
      ctx.out.print(await listUnknownReads(ctx.pool, orgId), UNKNOWN_COLUMNS);
    },
  },
];
