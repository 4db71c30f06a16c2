import { stringOption } from '../options.js';
import type { CommandModule } from '../registry.js';

/** Organizations (INTERFACES.md). */
export default {
  groups: { orgs: 'organizations: the tenants that API keys and data belong to' },
  commands: [
    {
      path: ['orgs', 'create'],
      summary: 'create an organization',
      description: 'Prints the new organization (its id is what --org takes in other commands).',
      options: [
        { flags: '--name <name>', description: 'display name (1 to 255 characters)', required: true },
        { flags: '--id-only', description: 'print only the new id, for scripts', conflicts: ['json'] },
      ],
      examples: ['npx tracking orgs create --name "Acme"', 'ORG=$(npx tracking orgs create --name "Acme" --id-only)'],
      async run(input, ctx) {
        const name = stringOption(input, 'name');
        const { createOrg } = await import('../../../shared/domain/orgs-and-keys/commands.js');
        const org = await createOrg(await ctx.service(), name, { project: (position, streams) => ctx.project(position, streams) });
        if (input.options.idOnly) ctx.out.line(String(org.id));
        else ctx.out.print(org, ['id', 'name']);
      },
    },
    {
      path: ['orgs', 'list'],
      summary: 'list organizations',
      examples: ['npx tracking orgs list', 'npx tracking orgs list --json'],
      async run(_input, ctx) {
        const { listOrgs } = await import('../../../projections/orgs-and-keys/queries.js');
        ctx.out.print(await listOrgs(await ctx.pool()), ['id', 'name', 'created_at']);
      },
    },
  ],
} satisfies CommandModule;
