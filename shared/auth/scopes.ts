/** Scopes an API key can be minted with (docs/api.md "Authentication", docs/cli.md "keys mint"). */
export const MINTABLE_SCOPES = [
  'assets:read',
  'assets:write',
  'locations:read',
  'locations:write',
  'tracking:read',
  'scans:write',
  'webhooks:read',
  'webhooks:write',
  'audit:read',
  'alerts:read',
  'alerts:write',
  'counts:read',
  'counts:write',
] as const;

/** Internal scope carried by session tokens only; never mintable for an API key. */
export const ADMIN_SCOPE = 'keys:admin';

export const TOKEN_AUDIENCE = 'tracking-api';
export const BEARER_REALM = 'Bearer realm="tracking-api"';
