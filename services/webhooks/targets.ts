import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Where a webhook may go (docs/api.md "Webhooks"): unless private targets are allowed, never to a
 * loopback, private, link-local or otherwise non-public address, whether the URL names it or a
 * host name resolves to it. The check is made when an endpoint is created or changed, and again
 * at every send, on the addresses the connection then uses (`checkedLookup`), so a name that
 * resolves elsewhere later (DNS rebinding) gains nothing.
 */

/** ipaddr.js ranges a public target may be in; everything else (loopback, private, linkLocal, uniqueLocal, …) is refused. */
const PUBLIC_RANGES = new Set(['unicast']);

/** Why an address is refused as a target, or null for a public one. */
export function refusedAddress(address: string): string | null {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  let parsed = ipaddr.parse(address);
  // ::ffff:10.0.0.1 is 10.0.0.1 (and ::ffff:127.0.0.1 is loopback).
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  return PUBLIC_RANGES.has(range) ? null : `${address} is a ${range} address`;
}

export class RefusedTargetError extends Error {
  readonly code = 'WEBHOOK_TARGET_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'RefusedTargetError';
  }
}

/** The host of a URL as the resolver and `net` take it: without the brackets of an IPv6 literal. */
export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * A `lookup` for http(s).request that resolves the host, refuses it when any of its addresses is
 * not public, and hands the connection exactly the addresses it checked.
 */
export function checkedLookup(allowPrivate: boolean): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as dns.LookupAddress[];
      if (!allowPrivate) {
        for (const { address } of list) {
          const refused = refusedAddress(address);
          if (refused) return callback(new RefusedTargetError(`${hostname} resolves to ${refused}`), '', 0);
        }
      }
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list[0];
      if (!first) return callback(new RefusedTargetError(`${hostname} resolves to no address`), '', 0);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * Why a URL's host is refused as a target now (an IP literal that is not public, or a name that
 * resolves to one), or null. A name that does not resolve is not refused here: it is checked
 * again at every send.
 */
export async function refusedHost(url: URL): Promise<string | null> {
  const host = bareHost(url);
  if (net.isIP(host)) return refusedAddress(host);
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true });
  } catch {
    return null;
  }
  for (const { address } of addresses) {
    const refused = refusedAddress(address);
    if (refused) return `${host} resolves to ${refused}`;
  }
  return null;
}
