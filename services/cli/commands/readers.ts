import type { Pool } from '../../../shared/db/pool.js';
import { orgIdOption, stringOption } from '../options.js';
import { CliUsageError, type CommandModule } from '../registry.js';

/** The org of `--org`, which must exist. */
async function existingOrg(pool: Pool, orgId: number): Promise<number> {
  const { findOrg } = await import('../../../projections/orgs-and-keys/queries.js');
  if (!(await findOrg(pool, orgId))) throw new CliUsageError(`organization ${orgId} does not exist`);
  return orgId;
}

const POINT_COLUMNS = ['reader_id', 'capture_point', 'location_id', 'location_external_key'];
const ORG = { flags: '--org <org-id>', description: 'the organization', required: true };
const READER = { flags: '--reader <reader-id>', description: 'the reader id gateways key its messages by', required: true };
const POINT = { flags: '--capture-point <name>', description: "a capture point of the reader (an antenna's name)", required: true };

/** Fixed readers and their scan points (INTERFACES.md). */
export default {
  groups: {
    readers: 'fixed RFID readers: which organization each belongs to',
    'scan-points': 'where each (reader, capture point) reads: its location',
  },
  commands: [
    {
      path: ['readers', 'register'],
      summary: 'register a reader to an organization',
      description: 'A reader id belongs to one organization: registering it again for the same one changes nothing, for another one is refused.',
      options: [ORG, READER],
      examples: ['npx tracking readers register --org 1 --reader dock-door-3'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const readerId = stringOption(input, 'reader');
        await existingOrg(await ctx.pool(), orgId);
        const { registerReader } = await import('../../../shared/domain/readers/commands.js');
        const reader = await registerReader(await ctx.service(), orgId, readerId, { project: (position, streams) => ctx.project(position, streams) });
        ctx.out.print({ reader_id: reader.reader_id, org_id: reader.org_id }, ['reader_id', 'org_id']);
      },
    },
    {
      path: ['readers', 'list'],
      summary: "list an organization's readers",
      options: [ORG],
      examples: ['npx tracking readers list --org 1 --json'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const pool = await ctx.pool();
        await existingOrg(pool, orgId);
        const { listReaders } = await import('../../../projections/readers/queries.js');
        ctx.out.print(await listReaders(pool, orgId), ['reader_id', 'org_id', 'registered_at']);
      },
    },
    {
      path: ['scan-points', 'assign'],
      summary: 'assign a capture point of a reader to a location (re-assigning moves it)',
      options: [ORG, READER, POINT, { flags: '--location <external-key>', description: "the location's external_key", required: true }],
      examples: ['npx tracking scan-points assign --org 1 --reader dock-door-3 --capture-point dock-door-3-1 --location DOCK-3'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const point = { orgId, readerId: stringOption(input, 'reader'), capturePoint: stringOption(input, 'capturePoint', '--capture-point'), locationExternalKey: stringOption(input, 'location') };
        await existingOrg(await ctx.pool(), orgId);
        const { assignScanPoint } = await import('../../../shared/domain/readers/commands.js');
        ctx.out.print(await assignScanPoint(await ctx.service(), point, { project: (position, streams) => ctx.project(position, streams) }), POINT_COLUMNS);
      },
    },
    {
      path: ['scan-points', 'list'],
      summary: "list an organization's assigned scan points",
      options: [ORG, { flags: '--reader <reader-id>', description: 'only this reader' }],
      examples: ['npx tracking scan-points list --org 1', 'npx tracking scan-points list --org 1 --reader dock-door-3 --json'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const pool = await ctx.pool();
        await existingOrg(pool, orgId);
        const { listScanPoints } = await import('../../../projections/readers/queries.js');
        const reader = typeof input.options.reader === 'string' ? input.options.reader : undefined;
        ctx.out.print(await listScanPoints(pool, orgId, reader), POINT_COLUMNS);
      },
    },
    {
      path: ['scan-points', 'unassign'],
      summary: 'unassign a capture point (its reads then place nothing)',
      options: [ORG, READER, POINT],
      examples: ['npx tracking scan-points unassign --org 1 --reader dock-door-3 --capture-point dock-door-3-1'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const point = { orgId, readerId: stringOption(input, 'reader'), capturePoint: stringOption(input, 'capturePoint', '--capture-point') };
        await existingOrg(await ctx.pool(), orgId);
        const { unassignScanPoint } = await import('../../../shared/domain/readers/commands.js');
        ctx.out.print(await unassignScanPoint(await ctx.service(), point, { project: (position, streams) => ctx.project(position, streams) }), ['reader_id', 'capture_point']);
      },
    },
  ],
} satisfies CommandModule;
