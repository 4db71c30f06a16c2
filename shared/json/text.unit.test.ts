import { describe, expect, it } from 'vitest';
import { JsonText, jsonObject } from './text.js';

describe('jsonObject', () => {
  it('keeps key order, embeds JSON text verbatim and serializes everything else', () => {
    const body = jsonObject({ data: new JsonText('[{"id":1}]'), limit: 50, note: 'a "quoted" value', gone: null, ok: true });
    expect(body.text).toBe('{"data":[{"id":1}],"limit":50,"note":"a \\"quoted\\" value","gone":null,"ok":true}');
    expect(JSON.parse(body.text)).toEqual({ data: [{ id: 1 }], limit: 50, note: 'a "quoted" value', gone: null, ok: true });
  });
});
