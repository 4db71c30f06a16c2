import { isFieldError, parseId, parseTimestamp } from '../../../shared/http/validation.js';
import { createOrg, mintApiKey, mintSession, revokeApiKey } from '../../../shared/domain/orgs-and-keys/commands.js';
import { findOrg, listApiKeys, listOrgs } from '../../../projections/orgs-and-keys/queries.js';
import { rotateSigningKey } from '../../../shared/auth/signing-keys.js';
import { rotateSigningKeyEncryption } from '../../../shared/auth/encryption-key-rotation.js';
import { CliUsageError, requireOption, type CliCommand } from '../command.js';

function orgIdOption(options: Record<string, string | boolean | undefined>): number {
  const parsed = parseId('--org', requireOption(options, 'org'));
  if (isFieldError(parsed)) throw new CliUsageError(parsed.message);
  return parsed;
}

/** Organizations, API keys, signing keys and sessions (INTERFACES.md). */
export const authCommands: CliCommand[] = [
  {
    path: ['orgs', 'create'],
    usage: 'orgs create --name <name>',
    options: ['name'],
    async run(ctx, options) {
      const org = await createOrg(ctx, requireOption(options, 'name'), { project: ctx.project });
      ctx.out.print(org, ['id', 'name']);
    },
  },
  {
    path: ['orgs', 'list'],
    usage: 'orgs list',
    async run(ctx) {
      ctx.out.print(await listOrgs(ctx.pool), ['id', 'name', 'created_at']);
    },
  },
  {
    path: ['keys', 'mint'],
    usage: 'keys mint --org <org-id> --name <name> --scopes <a,b,...> [--expires-at <RFC 3339>]',
    options: ['org', 'name', 'scopes', 'expires-at'],
    async run(ctx, options) {
      const orgId = orgIdOption(options);
      const name = requireOption(options, 'name');
      const scopes = requireOption(options, 'scopes').split(',');
      let expiresAt: Date | null = null;
      if (options['expires-at'] !== undefined) {
        expiresAt = parseTimestamp(String(options['expires-at']));
        if (!expiresAt) throw new CliUsageError('--expires-at must be an RFC 3339 timestamp, e.g. 2027-01-31T00:00:00Z');
      }
      const key = await mintApiKey(ctx, { orgId, name, scopes, expiresAt }, { project: ctx.project });
      if (!ctx.out.json) process.stderr.write('The token is shown only now: store it safely.\n');
      ctx.out.print(key, ['id', 'name', 'scopes', 'expires_at', 'token']);
    },
  },
  {
    path: ['keys', 'list'],
    usage: 'keys list --org <org-id>',
    options: ['org'],
    async run(ctx, options) {
      const orgId = orgIdOption(options);
      if (!(await findOrg(ctx.pool, orgId))) throw new CliUsageError(`organization ${orgId} does not exist`);
      ctx.out.print(await listApiKeys(ctx.pool, orgId), ['id', 'name', 'prefix', 'scopes', 'created_at', 'last_used_at', 'expires_at', 'revoked_at']);
    },
  },
  {
    path: ['keys', 'revoke'],
    usage: 'keys revoke <key-id>',
    positionals: { min: 1, max: 1 },
    async run(ctx, _options, positionals) {
      ctx.out.print(await revokeApiKey(ctx, positionals[0]!, { project: ctx.project }), ['id', 'revoked_at']);
    },
  },
  {
    path: ['keys', 'rotate-signing-key'],
    usage: 'keys rotate-signing-key',
    async run(ctx) {
      ctx.out.print(await rotateSigningKey(ctx.pool, ctx.keyEncryption.keys), ['kid', 'previous_kid', 'algorithm', 'created_at']);
    },
  },
  {
    path: ['keys', 'rotate-encryption-key'],
    usage: 'keys rotate-encryption-key   (new key: NEW_SIGNING_KEY_ENCRYPTION_KEY, or a fresh key file for the embedded default)',
    async run(ctx) {
      ctx.out.print(await rotateSigningKeyEncryption(ctx), ['encryption_key_id', 'previous_encryption_key_ids', 'signing_keys', 'key_file']);
    },
  },
  {
    path: ['sessions', 'mint'],
    usage: 'sessions mint --user <email> [--org <org-id>] [--ttl-seconds <n>]',
    options: ['user', 'org', 'ttl-seconds'],
    async run(ctx, options) {
      const user = requireOption(options, 'user');
      const orgId = options.org === undefined ? null : orgIdOption(options);
      let ttlSeconds: number | undefined;
      if (options['ttl-seconds'] !== undefined) {
        const raw = String(options['ttl-seconds']);
        if (!/^\d+$/.test(raw)) throw new CliUsageError('--ttl-seconds must be a whole number of seconds');
        ttlSeconds = Number(raw);
      }
      ctx.out.print(await mintSession(ctx, { user, orgId, ttlSeconds }), ['token', 'expires_at']);
    },
  },
];
