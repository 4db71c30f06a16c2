import { MINTABLE_SCOPES, ADMIN_SCOPE } from '../../../shared/auth/scopes.js';
import { orgIdOption, stringOption, timestampOption } from '../options.js';
import { CliUsageError, type CommandModule } from '../registry.js';

type MintableScope = (typeof MINTABLE_SCOPES)[number];

/** What each scope lets a key do, for `keys mint --help` (the list itself is MINTABLE_SCOPES). */
const SCOPE_HELP: Record<MintableScope, string[]> = {
  'assets:read': ['read assets and their tags'],
  'assets:write': ['create, change and delete assets and their tags'],
  'locations:read': ['read locations and the location tree'],
  'locations:write': ['create, change, move and delete locations'],
  'tracking:read': ['current locations, location history, reports'],
  'scans:write': ['submit scans: ingestion keys for handheld backends, refused by', 'every public endpoint that needs another scope'],
  'webhooks:read': ['read webhook endpoints and their deliveries'],
  'webhooks:write': ['create, change, rotate and delete webhook endpoints; redeliver'],
  'audit:read': ['read the audit log: who changed what, and when'],
  'alerts:read': ['read alert rules and alerts'],
  'alerts:write': ['create, change and delete alert rules; acknowledge alerts'],
  'counts:read': ['read counts of a zone and their items'],
  'counts:write': ['start and close counts of a zone'],
};

const SCOPES_TEXT = [
  'Scopes (--scopes takes them comma-separated):',
  ...MINTABLE_SCOPES.flatMap((scope) => SCOPE_HELP[scope].map((line, i) => `  ${(i === 0 ? scope : '').padEnd(16)} ${line}`)),
  `${ADMIN_SCOPE} is refused (session tokens only). A write scope implies nothing:`,
  'mint read and write together, e.g. --scopes assets:read,assets:write.',
].join('\n');

/** API keys and the installation's signing key (docs/cli.md "keys"). */
export default {
  groups: { keys: 'API keys (tokens for partners and backends) and the signing key' },
  commands: [
    {
      path: ['keys', 'mint'],
      summary: 'mint an API key for an organization',
      description: 'The token is printed only now: it is not stored, only a display prefix is.',
      details: SCOPES_TEXT,
      options: [
        { flags: '--org <org-id>', description: 'the organization the key belongs to', required: true },
        { flags: '--name <name>', description: 'what the key is for, e.g. the partner it is given to', required: true },
        { flags: '--scopes <scopes>', description: 'comma-separated scopes (see below)', required: true },
        { flags: '--expires-at <timestamp>', description: 'RFC 3339 time at which the key stops working (default: never)' },
        { flags: '--token-only', description: 'print only the token, for scripts', conflicts: ['json'] },
      ],
      examples: [
        'npx tracking keys mint --org 1 --name partner --scopes assets:read,locations:read',
        'TOKEN=$(npx tracking keys mint --org 1 --name partner --scopes assets:read,assets:write --token-only)',
        'npx tracking keys mint --org 1 --name handheld --scopes scans:write --expires-at 2027-01-31T00:00:00Z --json',
      ],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const name = stringOption(input, 'name');
        const scopes = stringOption(input, 'scopes').split(',');
        const expiresAt = timestampOption(input, 'expiresAt', '--expires-at');
        const { mintApiKey } = await import('../../../shared/domain/orgs-and-keys/commands.js');
        const key = await mintApiKey(await ctx.service(), { orgId, name, scopes, expiresAt }, { project: (position, streams) => ctx.project(position, streams), by: { kind: 'cli' } });
        if (input.options.tokenOnly) {
          ctx.out.line(key.token);
          return;
        }
        if (ctx.out.json) {
          ctx.out.print(key);
          return;
        }
        ctx.out.print(key, ['id', 'name', 'scopes', 'expires_at']);
        ctx.out.note('\nToken (shown only now: store it safely):');
        ctx.out.note(key.token);
      },
    },
    {
      path: ['keys', 'list'],
      summary: "list an organization's API keys (never their tokens)",
      options: [{ flags: '--org <org-id>', description: 'the organization', required: true }],
      examples: ['npx tracking keys list --org 1'],
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const { findOrg, listApiKeys, KEY_LIST_FIELDS } = await import('../../../projections/orgs-and-keys/queries.js');
        const pool = await ctx.pool();
        if (!(await findOrg(pool, orgId))) throw new CliUsageError(`organization ${orgId} does not exist`);
        const keys = await listApiKeys(pool, orgId);
        if (ctx.out.json) {
          // docs/cli.md ("keys list") fixes these fields; who minted and revoked is in the table only.
          ctx.out.print(keys.map((key) => Object.fromEntries(KEY_LIST_FIELDS.map((field) => [field, key[field]]))));
          return;
        }
        const actor = (by: (typeof keys)[number]['minted_by']) => (by === null ? null : by.kind === 'cli' ? 'cli' : by.email);
        ctx.out.print(
          keys.map((key) => ({ ...key, minted_by: actor(key.minted_by), revoked_by: actor(key.revoked_by) })),
          [...KEY_LIST_FIELDS, 'minted_by', 'revoked_by'],
        );
      },
    },
    {
      path: ['keys', 'revoke'],
      summary: 'revoke an API key',
      description: 'Every api process refuses the key within a second. Revoking a revoked key answers the first revocation.',
      arguments: [{ name: 'key-id', description: 'the key id (ak_...), as `keys list` shows it' }],
      examples: ['npx tracking keys revoke ak_01jdx4a8q0n7yv5k3m2b9c6d1e'],
      async run(input, ctx) {
        const { revokeApiKey } = await import('../../../shared/domain/orgs-and-keys/commands.js');
        ctx.out.print(
          await revokeApiKey(await ctx.service(), input.args[0]!, { project: (position, streams) => ctx.project(position, streams), by: { kind: 'cli' } }),
          ['id', 'revoked_at'],
        );
      },
    },
    {
      path: ['keys', 'rotate-signing-key'],
      summary: 'sign new tokens with a fresh key',
      description: 'Tokens signed with the previous key stay valid until they are revoked or expire.',
      examples: ['npx tracking keys rotate-signing-key'],
      async run(_input, ctx) {
        const { rotateSigningKey } = await import('../../../shared/auth/signing-keys.js');
        const service = await ctx.service();
        ctx.out.print(await rotateSigningKey(service.pool, service.keyEncryption.keys), ['kid', 'previous_kid', 'algorithm', 'created_at']);
      },
    },
    {
      path: ['keys', 'rotate-encryption-key'],
      summary: 're-encrypt every signing key and webhook secret under a new key-encryption key',
      description:
        'The new key comes from NEW_SIGNING_KEY_ENCRYPTION_KEY; for the embedded default without it, a fresh key file is written in DATA_DIR (the old one is kept as .previous). See docs/operations.md, "Secrets: the signing keys and their encryption".',
      examples: ['npx tracking keys rotate-encryption-key', 'NEW_SIGNING_KEY_ENCRYPTION_KEY=$(openssl rand -base64 32) npx tracking keys rotate-encryption-key --json'],
      async run(_input, ctx) {
        const { rotateSigningKeyEncryption } = await import('../../../shared/auth/encryption-key-rotation.js');
        const { webhookSecrets } = await import('../../webhooks/secrets.js');
        const { others, ...rotated } = await rotateSigningKeyEncryption(await ctx.service(), [webhookSecrets]);
        ctx.out.print({ ...rotated, ...others }, ['encryption_key_id', 'previous_encryption_key_ids', 'signing_keys', 'webhook_secrets', 'key_file']);
      },
    },
  ],
} satisfies CommandModule;
