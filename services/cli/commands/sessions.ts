import { orgIdOption, stringOption, wholeNumberOption } from '../options.js';
import type { CommandModule } from '../registry.js';

/** Web-application sessions (docs/cli.md "sessions"). */
export default {
  groups: { sessions: 'session tokens of the web application' },
  commands: [
    {
      path: ['sessions', 'mint'],
      summary: 'mint a web-application session token',
      description:
        "A token of a session of its own, one hour by default, at most 24 hours. For a member of the organization it carries their role there and ends when the role changes or they are removed; for an email that is no member of it, it is the contract's unscoped session (keys:admin). Without --org its principal has no organization.",
      options: [
        { flags: '--user <email>', description: "the user's email address", required: true },
        { flags: '--org <org-id>', description: 'the organization the session works in' },
        { flags: '--ttl-seconds <n>', description: 'lifetime in seconds (default 3600)' },
        { flags: '--token-only', description: 'print only the token, for scripts', conflicts: ['json'] },
      ],
      examples: ['npx tracking sessions mint --user ada@example.com --org 1', 'SESSION=$(npx tracking sessions mint --user ada@example.com --org 1 --token-only)'],
      async run(input, ctx) {
        const user = stringOption(input, 'user');
        const orgId = input.options.org === undefined ? null : orgIdOption(input);
        const ttlSeconds = wholeNumberOption(input, 'ttlSeconds', '--ttl-seconds', 'seconds');
        const { mintSession } = await import('../../../shared/domain/people/session-tokens.js');
        const session = await mintSession(await ctx.service(), { user, orgId, ttlSeconds });
        if (input.options.tokenOnly) {
          ctx.out.line(session.token);
          return;
        }
        if (ctx.out.json) {
          ctx.out.print(session);
          return;
        }
        ctx.out.print(session, ['expires_at']);
        ctx.out.note('\nToken:');
        ctx.out.note(session.token);
      },
    },
  ],
} satisfies CommandModule;
