/**
 * Secrets never reach a log line or a printed error: bearer tokens (any JWT-shaped text),
 * passwords inside connection URLs, and the values registered here (the key-encryption keys and
 * the generated database passwords). The logger passes every line through `redactSecrets`, so
 * this also covers what a library logs or what an error message happens to quote.
 */

const REDACTED = '[redacted]';

/** `scheme://user:password@`: the password goes, the user stays (it says which database role connected). */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s"']*):([^@\s"']*)@/gi;
/** Three base64url segments starting with a JSON header: a JWT, signed or not. */
const JWT = /\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;
/** A bearer credential quoted with its scheme, whatever its shape. */
const BEARER = /\b(Bearer\s+)[^\s"',;]+/gi;

/**
 * Shorter values are not registered: replacing them would mangle ordinary text (a password
 * "tracking" would erase the service's name from every line). Every generated secret is longer,
 * and a short password inside a URL is still masked by the URL pattern.
 */
const MIN_SECRET_LENGTH = 12;

const secrets = new Set<string>();
let secretPattern: RegExp | null = null;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Adds a value that must never appear in a log line or printed error (a key, a password). */
export function registerSecret(value: string | null | undefined): void {
  if (!value || value.length < MIN_SECRET_LENGTH || secrets.has(value)) return;
  secrets.add(value);
  // Longest first, so a secret that contains another is replaced whole.
  const alternatives = [...secrets].sort((a, b) => b.length - a.length).map(escapeRegExp);
  secretPattern = new RegExp(alternatives.join('|'), 'g');
}

/** Registers the password of a connection URL, if it has one. */
export function registerUrlSecret(url: string | null | undefined): void {
  if (!url) return;
  try {
    registerSecret(decodeURIComponent(new URL(url).password));
  } catch {
    // Not a URL: nothing to register; the URL pattern still masks it in text.
  }
}

/** `text` with tokens, URL passwords and registered secrets replaced. */
export function redactSecrets(text: string): string {
  let out = text.replace(URL_PASSWORD, `$1:${REDACTED}@`).replace(JWT, REDACTED).replace(BEARER, `$1${REDACTED}`);
  if (secretPattern) out = out.replace(secretPattern, REDACTED);
  return out;
}

/** A connection URL fit to show: its password replaced. */
export function redactUrl(url: string): string {
  return url.replace(URL_PASSWORD, `$1:${REDACTED}@`);
}
