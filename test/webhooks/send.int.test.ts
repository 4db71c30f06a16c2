import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusedAddress } from '../../services/webhooks/targets.js';
import { retryDelayMs, RETRY_DELAYS_SECONDS, MAX_ATTEMPTS } from '../../services/webhooks/delivery.js';
import { sendWebhook } from '../../services/webhooks/send.js';
import { webhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * One delivery attempt against a real receiver in this process: the refusal of private targets
 * at send time (on the address the name resolves to then), and the signature; and the address
 * rules and the retry schedule on their own.
 */

let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

const SECRET = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const strict = { allowPrivate: false, timeoutMs: 2000 };

describe('send time: private targets', () => {
  it('a name resolving to loopback (localhost), a loopback literal and an IPv4-mapped one are refused before any byte is sent', async () => {
    for (const url of [`http://localhost:${receiver.port}/ssrf`, `http://127.0.0.1:${receiver.port}/ssrf`, `http://[::ffff:127.0.0.1]:${receiver.port}/ssrf`, `http://[::1]:${receiver.port}/ssrf`]) {
      const attempt = await sendWebhook(url, 'msg_1', '{"type":"asset.moved"}', [SECRET], strict);
      expect([url, attempt.ok, attempt.status, attempt.error]).toEqual([url, false, null, expect.stringMatching(/^target refused: .*(loopback|ipv4Mapped)/)]);
    }
    expect(receiver.to('/ssrf')).toHaveLength(0);
  });

  it('allowed, the same target is delivered, signed, verifiable by standardwebhooks', async () => {
    const body = JSON.stringify({ type: 'asset.moved', timestamp: new Date().toISOString(), data: {} });
    const attempt = await sendWebhook(`http://localhost:${receiver.port}/ok`, 'msg_2', body, [SECRET], { allowPrivate: true, timeoutMs: 2000 });
    expect(attempt).toMatchObject({ ok: true, status: 200, error: null });
    const [got] = receiver.to('/ok');
    expect(got!.body).toBe(body);
    expect(new Webhook(SECRET).verify(got!.body, got!.headers as Record<string, string>)).toEqual(JSON.parse(body));
  });

  it('a 3xx is a failure and is not followed; a non-2xx is a failure; no answer in time is a failure', async () => {
    receiver.answer('/redirect', () => ({ status: 307, location: receiver.url('/target') }));
    receiver.answer('/gone', () => ({ status: 410 }));
    receiver.answer('/slow', () => ({ status: 200, delayMs: 1500 }));
    const allowed = { allowPrivate: true, timeoutMs: 500 };
    expect(await sendWebhook(receiver.url('/redirect'), 'm', '{}', [SECRET], allowed)).toMatchObject({ ok: false, status: 307, error: `redirect to ${receiver.url('/target')} not followed` });
    expect(receiver.to('/target')).toHaveLength(0);
    expect(await sendWebhook(receiver.url('/gone'), 'm', '{}', [SECRET], allowed)).toMatchObject({ ok: false, status: 410, error: 'HTTP 410' });
    const slow = await sendWebhook(receiver.url('/slow'), 'm', '{}', [SECRET], allowed);
    expect(slow).toMatchObject({ ok: false, status: null, error: 'no answer within 500 ms' });
    expect(slow.durationMs).toBeLessThan(1400);
    expect((await sendWebhook('http://127.0.0.1:1/closed', 'm', '{}', [SECRET], allowed)).error).toMatch(/^ECONNREFUSED/);
  });
});

describe('address rules', () => {
  it('refuses loopback, private, link-local, unique-local, unspecified, multicast and IPv4-mapped forms of them; allows public unicast', () => {
    for (const address of ['127.0.0.1', '127.9.9.9', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', '::ffff:10.0.0.1', '::ffff:127.0.0.1', '::ffff:169.254.1.1', 'ff02::1']) {
      expect([address, refusedAddress(address)]).toEqual([address, expect.stringContaining(`${address} is a`)]);
    }
    for (const address of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect([address, refusedAddress(address)]).toEqual([address, null]);
  });

  it('the retry schedule: nine retries over about three days, each within ±20 %', () => {
    expect(MAX_ATTEMPTS).toBe(10);
    expect(RETRY_DELAYS_SECONDS.reduce((a, b) => a + b, 0) / 86_400).toBeCloseTo(3.15, 1);
    RETRY_DELAYS_SECONDS.forEach((seconds, i) => {
      expect(retryDelayMs(i + 1, 1, () => 0)).toBe(Math.round(seconds * 800));
      expect(retryDelayMs(i + 1, 1, () => 1)).toBe(Math.round(seconds * 1200));
      expect(retryDelayMs(i + 1, 0.5, () => 0.5)).toBe(seconds * 500);
    });
  });
});
