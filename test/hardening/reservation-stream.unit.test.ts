import { describe, expect, it } from 'vitest';
import { reservationStream } from '../../shared/domain/reservations.js';

// Reservation stream names hold the reserved value: naming one must never throw (it threw
// URIError for a lone surrogate), and distinct values keep distinct names.
describe('reservationStream', () => {
  it('names every string, well-formed or not, keeping the names of well-formed values', () => {
    expect(reservationStream('tag', 7, 'rfid:E200 001/ä')).toBe(`unique-tag-7-${encodeURIComponent('rfid:E200 001/ä')}`);
    const values = ['\ud800', '\udc00', 'a\ud800b', '\udc00\ud800', 'x\ud83d', '\ud83d\ude00', '%uD800', 'ok'];
    const names = values.map((v) => reservationStream('tag', 7, v));
    expect(new Set(names).size).toBe(values.length);
    expect(names[0]).toBe('unique-tag-7-%uD800');
    expect(names[2]).toBe('unique-tag-7-a%uD800b');
  });
});
