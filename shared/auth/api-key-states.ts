/**
 * What a request needs to know about an API key beyond its token, where the authenticator reads
 * it (the keys read model, projections/orgs-and-keys, handed in through the service's
 * ReadModelQueries) and the channel that tells it a key changed.
 */

export interface ApiKeyState {
  id: string;
  orgId: number;
  name: string;
  scopes: string[];
  expiresAt: Date | null;
  revokedAt: Date | null;
}

export interface ApiKeyStates {
  findApiKeyStates(keyIds: readonly string[]): Promise<Map<string, ApiKeyState>>;
}

/** Channel on which the read model tells api processes that a key changed, so their caches drop it at once. */
export const API_KEY_CHANGED_CHANNEL = 'api_key_changed';
