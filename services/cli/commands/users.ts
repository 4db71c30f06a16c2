import { orgIdOption, stringOption } from '../options.js';
import { CliUsageError, type CommandModule } from '../registry.js';

const MEMBER_ROLE_TEXT = [
  'Roles:',
  '  admin     everything an operator may, and readers and scan points,',
  '            webhooks, API keys, members and the audit log',
  '  operator  everything a viewer may, and assets, locations and tags',
  '  viewer    master data, the tracking views and reports, read only',
  '  (member, the earlier name of operator, is read as operator)',
  'Links are valid 72 hours and work once; they start with PUBLIC_URL',
  '(default http://HOST:PORT). No mail is sent: hand the link over yourself.',
].join('\n');

function memberRoleOption(input: Parameters<typeof stringOption>[0]): string {
  const role = stringOption(input, 'role');
  if (!['admin', 'operator', 'viewer', 'member'].includes(role)) throw new CliUsageError(`--role must be admin, operator or viewer (got "${role}")`);
  return role === 'member' ? 'operator' : role;
}

/** People of the web application (docs/cli.md "users"). */
export default {
  groups: { users: 'people of the web application: users, roles, invitations and new links' },
  commands: [
    {
      path: ['users', 'create'],
      summary: 'create a user in an organization, with a one-time link to set the password',
      description: 'The user signs in to the web application once they have set their password through the link.',
      details: MEMBER_ROLE_TEXT,
      options: [
        { flags: '--email <email>', description: "the user's email address (how they sign in)", required: true },
        { flags: '--org <org-id>', description: 'the organization they belong to', required: true },
        { flags: '--role <role>', description: 'admin, operator or viewer', required: true },
      ],
      examples: ['npx tracking users create --email ada@example.com --org 1 --role admin', 'npx tracking users create --email ada@example.com --org 1 --role admin --json'],
      async run(input, ctx) {
        const email = stringOption(input, 'email');
        const orgId = orgIdOption(input);
        const role = memberRoleOption(input);
        const [{ createUser }, { publicUrl }] = await Promise.all([import('../../../shared/domain/people/commands.js'), import('../../../shared/config.js')]);
        const user = await createUser(
          await ctx.service(),
          { email, orgId, role, by: { kind: 'cli' }, publicUrl: publicUrl(ctx.config()) },
          { project: (position, streams) => ctx.project(position, streams) },
        );
        ctx.out.print(user, ['id', 'email', 'org_id', 'role']);
        ctx.out.note('\nSetup link (valid 72 hours, works once):');
        ctx.out.note(user.setup_url);
      },
    },
    {
      path: ['users', 'list'],
      summary: "list an organization's users, with their role, whether they chose a password yet and whether they are locked out",
      options: [{ flags: '--org <org-id>', description: 'the organization', required: true }],
      examples: ['npx tracking users list --org 1'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const [{ findOrg }, { listMembers }] = await Promise.all([import('../../../projections/orgs-and-keys/queries.js'), import('../../../projections/people/queries.js')]);
        const pool = await ctx.pool();
        if (!(await findOrg(pool, orgId))) throw new CliUsageError(`organization ${orgId} does not exist`);
        ctx.out.print(await listMembers(pool, orgId), ['id', 'email', 'role', 'status', 'created_at', 'last_sign_in_at', 'locked']);
      },
    },
    {
      path: ['users', 'invite'],
      summary: 'invite someone to an organization: a one-time link, valid 72 hours',
      description: 'Someone new chooses their password when they accept; someone who already has an account enters theirs.',
      details: MEMBER_ROLE_TEXT,
      options: [
        { flags: '--email <email>', description: 'the email address invited', required: true },
        { flags: '--org <org-id>', description: 'the organization', required: true },
        { flags: '--role <role>', description: 'admin, operator or viewer', required: true },
      ],
      examples: ['npx tracking users invite --email grace@example.com --org 1 --role operator'],
      async run(input, ctx) {
        const email = stringOption(input, 'email');
        const orgId = orgIdOption(input);
        const role = memberRoleOption(input);
        const [{ inviteUser }, { publicUrl }] = await Promise.all([import('../../../shared/domain/people/commands.js'), import('../../../shared/config.js')]);
        const invitation = await inviteUser(
          await ctx.service(),
          { email, orgId, role, by: { kind: 'cli' }, publicUrl: publicUrl(ctx.config()) },
          { project: (position, streams) => ctx.project(position, streams) },
        );
        ctx.out.print(invitation, ['email', 'org_id', 'role', 'expires_at']);
        ctx.out.note('\nInvitation link (works once):');
        ctx.out.note(invitation.invite_url);
      },
    },
    {
      path: ['users', 'set-role'],
      summary: "change a member's role in an organization; their session tokens end at once",
      description: 'The person keeps their sessions in the web application, which fetch tokens with the new role by themselves.',
      details: MEMBER_ROLE_TEXT,
      options: [
        { flags: '--email <email>', description: "the member's email address", required: true },
        { flags: '--org <org-id>', description: 'the organization', required: true },
        { flags: '--role <role>', description: 'admin, operator or viewer', required: true },
      ],
      examples: ['npx tracking users set-role --email grace@example.com --org 1 --role viewer'],
      async run(input, ctx) {
        const email = stringOption(input, 'email');
        const orgId = orgIdOption(input);
        const role = memberRoleOption(input);
        const { changeMemberRole, findUserByEmail } = await import('../../../shared/domain/people/commands.js');
        const service = await ctx.service();
        const user = await findUserByEmail(service, email);
        if (!user || !user.memberships.has(orgId)) throw new CliUsageError(`${email.trim().toLowerCase()} is not a member of organization ${orgId}`);
        const changed = await changeMemberRole(service, { userId: user.userId, orgId, role, by: { kind: 'cli' } }, { project: (position, streams) => ctx.project(position, streams) });
        ctx.out.print({ id: user.userId, email: user.email, org_id: orgId, role: changed }, ['id', 'email', 'org_id', 'role']);
      },
    },
    {
      path: ['users', 'reset-link'],
      summary: 'a new one-time link for a user to choose a password (a lost setup link or a forgotten password)',
      description:
        'The link replaces any earlier one and is valid 72 hours. The current password keeps working until the link is used; using it ends every session of the user in the web application.',
      details: 'No mail is sent: hand the link over yourself. It starts with PUBLIC_URL\n(default http://HOST:PORT).',
      options: [{ flags: '--email <email>', description: "the user's email address", required: true }],
      examples: ['npx tracking users reset-link --email ada@example.com', 'npx tracking users reset-link --email ada@example.com --json'],
      async run(input, ctx) {
        const email = stringOption(input, 'email');
        const [{ findUserByEmail, issuePasswordSetup }, { publicUrl }] = await Promise.all([import('../../../shared/domain/people/commands.js'), import('../../../shared/config.js')]);
        const service = await ctx.service();
        const user = await findUserByEmail(service, email);
        if (!user) throw new CliUsageError(`no user has the email address ${email.trim().toLowerCase()}`);
        const link = await issuePasswordSetup(
          service,
          { userId: user.userId, orgId: null, by: { kind: 'cli' }, publicUrl: publicUrl(ctx.config()) },
          { project: (position, streams) => ctx.project(position, streams) },
        );
        ctx.out.print(link, ['email', 'expires_at']);
        ctx.out.note('\nNew link (valid 72 hours, works once; earlier links no longer work):');
        ctx.out.note(link.setup_url);
      },
    },
  ],
} satisfies CommandModule;
