import { describe, expect, it } from 'vitest';
import { isMicrosOfRange, timeRangeMessage } from '../../time.js';
import { parseReaderMessage } from './reader-messages.js';

/** Reader messages: only what every store can hold is accepted; the rest is refused with its rule (a dead letter's reason). */
describe('reader messages', () => {
  const canonical = (observedAt: unknown) => Buffer.from(JSON.stringify({ reader_id: 'r1', reads: [{ capture_point: 'p1', tag_type: 'rfid', value: 'E1', observed_at: observedAt }] }));

  it('a canonical read out of the range is refused with the range message; an impossible date as a timestamp', () => {
    expect(parseReaderMessage(canonical('0000-01-01T00:00:00Z'))).toEqual({ ok: false, reason: `canonical shape: reads[0].observed_at: ${timeRangeMessage('observed_at')}` });
    expect(parseReaderMessage(canonical('9999-12-31T23:59:59-01:00'))).toEqual({ ok: false, reason: `canonical shape: reads[0].observed_at: ${timeRangeMessage('observed_at')}` });
    expect(parseReaderMessage(canonical('2026-02-30T00:00:00Z'))).toEqual({ ok: false, reason: 'canonical shape: reads[0].observed_at: an RFC 3339 timestamp' });
    expect(parseReaderMessage(canonical('2026-01-01T24:00:00Z'))).toEqual({ ok: false, reason: 'canonical shape: reads[0].observed_at: an RFC 3339 timestamp' });
    const last = parseReaderMessage(canonical('9999-12-31T23:59:59.999999Z'));
    expect(last.ok).toBe(true);
    if (last.ok) expect(isMicrosOfRange(last.reads[0]!.observedUs)).toBe(true);
  });

  it('a lone surrogate in any string of either shape is refused; a surrogate pair is fine', () => {
    const lone = '\\ud800';
    const canonicalWith = (field: string) => {
      const read: Record<string, string> = { capture_point: 'p1', tag_type: 'rfid', value: 'E1', observed_at: '2026-01-01T00:00:00Z' };
      const message: Record<string, unknown> = { reader_id: 'r1', reads: [read] };
      if (field === 'reader_id') message.reader_id = `r${lone}`;
      else read[field] = `${read[field]}${lone}`;
      return Buffer.from(JSON.stringify(message).replace(/\\\\ud800/g, lone));
    };
    expect(parseReaderMessage(canonicalWith('reader_id'))).toEqual({ ok: false, reason: 'canonical shape: reader_id: must be valid Unicode text (no lone surrogates)' });
    expect(parseReaderMessage(canonicalWith('capture_point'))).toEqual({ ok: false, reason: 'canonical shape: reads[0].capture_point: must be valid Unicode text (no lone surrogates)' });
    expect(parseReaderMessage(canonicalWith('value'))).toEqual({ ok: false, reason: 'canonical shape: reads[0].value: must be valid Unicode text (no lone surrogates)' });
    const cs463 = Buffer.from(`{"rfidReaderName":"r1","tags":[{"epc":"E1","timeStampOfRead":1,"capturePointName":"p${lone}"}]}`);
    expect(parseReaderMessage(cs463)).toEqual({ ok: false, reason: 'CS463 shape: tags[0].capturePointName: must be valid Unicode text (no lone surrogates)' });
    const pair = Buffer.from('{"reader_id":"r\\ud83d\\ude00","reads":[{"capture_point":"p","tag_type":"barcode","value":"\\ud83d\\ude00","observed_at":"2026-01-01T00:00:00Z"}]}');
    expect(parseReaderMessage(pair)).toMatchObject({ ok: true, readerId: 'r\u{1F600}', reads: [{ value: '\u{1F600}' }] });
  });

  it('CS463 microsecond integers: whole, exact (a safe integer) and not negative; anything else is refused', () => {
    const cs463 = (ts: unknown) => Buffer.from(`{"rfidReaderName":"r1","tags":[{"epc":"E1","timeStampOfRead":${String(ts)},"capturePointName":"p1"}]}`);
    expect(parseReaderMessage(cs463(1795691766764123))).toMatchObject({ ok: true, reads: [{ observedUs: 1795691766764123 }] });
    for (const bad of ['1.5', '-1', '9007199254740992', '1e400', '-1e400', '"1"', 'null']) {
      const parsed = parseReaderMessage(cs463(bad));
      expect(parsed.ok, bad).toBe(false);
    }
    const rssi = (value: string) => Buffer.from(`{"rfidReaderName":"r1","tags":[{"epc":"E1","timeStampOfRead":1,"capturePointName":"p1","rssi":"${value}"}]}`);
    expect(parseReaderMessage(rssi('9'.repeat(400)))).toEqual({ ok: false, reason: 'CS463 shape: tags[0].rssi: a finite number in a string' });
    expect(parseReaderMessage(rssi('-61.5'))).toMatchObject({ ok: true, reads: [{ rssi: -61.5 }] });
  });
});
