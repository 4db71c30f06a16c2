import { findOrg } from '../../../projections/orgs-and-keys/queries.js';
import { listReaders, listScanPoints } from '../../../projections/readers/queries.js';
import { assignScanPoint, registerReader, unassignScanPoint } from '../../../shared/domain/readers/commands.js';
import { isFieldError, parseId } from '../../../shared/http/validation.js';
import { CliUsageError, requireOption, type CliCommand, type CliContext } from '../command.js';

async function orgOption(ctx: CliContext, options: Record<string, string | boolean | undefined>): Promise<number> {
  const orgId = parseId('--org', requireOption(options, 'org'));
  if (isFieldError(orgId)) throw new CliUsageError(orgId.message);
  if (!(await findOrg(ctx.pool, orgId))) throw new CliUsageError(`organization ${orgId} does not exist`);
  return orgId;
}

const POINT_COLUMNS = ['reader_id', 'capture_point', 'location_id', 'location_external_key'];

/** Fixed readers and their scan points (INTERFACES.md). */
export const readerCommands: CliCommand[] = [
  {
    path: ['readers', 'register'],
    usage: 'readers register --org <org-id> --reader <reader-id>',
    options: ['org', 'reader'],
    async run(ctx, options) {
      const orgId = await orgOption(ctx, options);
      const reader = await registerReader(ctx, orgId, requireOption(options, 'reader'), { project: ctx.project });
      ctx.out.print({ reader_id: reader.reader_id, org_id: reader.org_id }, ['reader_id', 'org_id']);
    },
  },
  {
    path: ['readers', 'list'],
    usage: 'readers list --org <org-id>',
    options: ['org'],
    async run(ctx, options) {
      ctx.out.print(await listReaders(ctx.pool, await orgOption(ctx, options)), ['reader_id', 'org_id', 'registered_at']);
    },
  },
  {
    path: ['scan-points', 'assign'],
    usage: 'scan-points assign --org <org-id> --reader <reader-id> --capture-point <name> --location <location external_key>',
    options: ['org', 'reader', 'capture-point', 'location'],
    async run(ctx, options) {
      const orgId = await orgOption(ctx, options);
      const point = await assignScanPoint(
        ctx,
        { orgId, readerId: requireOption(options, 'reader'), capturePoint: requireOption(options, 'capture-point'), locationExternalKey: requireOption(options, 'location') },
        { project: ctx.project },
      );
      ctx.out.print(point, POINT_COLUMNS);
    },
  },
  {
    path: ['scan-points', 'list'],
    usage: 'scan-points list --org <org-id> [--reader <reader-id>]',
    options: ['org', 'reader'],
    async run(ctx, options) {
      const orgId = await orgOption(ctx, options);
      const reader = typeof options.reader === 'string' ? options.reader : undefined;
      ctx.out.print(await listScanPoints(ctx.pool, orgId, reader), POINT_COLUMNS);
    },
  },
  {
    path: ['scan-points', 'unassign'],
    usage: 'scan-points unassign --org <org-id> --reader <reader-id> --capture-point <name>',
    options: ['org', 'reader', 'capture-point'],
    async run(ctx, options) {
      const orgId = await orgOption(ctx, options);
      const point = await unassignScanPoint(ctx, { orgId, readerId: requireOption(options, 'reader'), capturePoint: requireOption(options, 'capture-point') }, { project: ctx.project });
      ctx.out.print(point, ['reader_id', 'capture_point']);
    },
  },
];
