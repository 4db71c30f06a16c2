import { z } from 'zod';
import { tagTypeField, tagValueField } from '../tags/schema.js';
import { NO_CONTROLS_PATTERN } from '../fields.js';
import { instantMicros, parseInstant, timeRangeMessage } from '../../time.js';
import type { RawRead } from './read-codec.js';

/**
 * The fixed-reader messages (docs/scan-ingestion.md "Message formats"), told apart by their fields: the
 * canonical shape (`reader_id`, `reads`) and the CS463 reader's native JSON (`rfidReaderName`,
 * `tags`, forwarded unchanged by the gateway). Fields neither shape names are ignored. A message
 * that is not JSON, or matches neither shape, is refused with a one-line reason (it goes to the
 * dead-letter topic); one read that does not fit refuses the whole message.
 */

export type ParsedMessage = { ok: true; readerId: string; reads: RawRead[] } | { ok: false; reason: string };

// JSON.parse keeps a lone surrogate escape (`"\ud800"`) as it is, but no Postgres text or jsonb
// value can hold one: refused here like in a request body (docs/api.md "What text the service accepts").
const LONE_SURROGATE = /\p{Cs}/u;
const UNICODE = 'must be valid Unicode text (no lone surrogates)';
const name = z.string().min(1).max(255).regex(NO_CONTROLS_PATTERN, 'no control characters').refine((v) => !LONE_SURROGATE.test(v), UNICODE);
const readValue = tagValueField.refine((v) => !LONE_SURROGATE.test(v), UNICODE);

/** An RFC 3339 timestamp of the time range (docs/api.md, "Time range"), decoded once to microseconds since the epoch. */
const observedAt = z.string().transform((value, ctx) => {
  const instant = parseInstant(value);
  if (instant.ok) return instantMicros(instant);
  ctx.addIssue({ code: 'custom', message: instant.problem === 'range' ? timeRangeMessage('observed_at') : 'an RFC 3339 timestamp' });
  return z.NEVER;
});

const canonical = z.object({
  reader_id: name,
  reads: z
    .array(
      z.object({
        capture_point: name,
        tag_type: tagTypeField,
        value: readValue,
        observed_at: observedAt,
        rssi: z.number().nullable().optional(),
      }),
    )
    .min(1),
});

const cs463 = z.object({
  rfidReaderName: name,
  tags: z
    .array(
      z.object({
        epc: z.string().min(1).max(255).regex(/^[0-9A-Fa-f]+$/, 'hexadecimal'),
        /** Microseconds since the Unix epoch. */
        timeStampOfRead: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
        capturePointName: name,
        // A finite number: 400 nines is a number in a string, but Infinity as a number.
        rssi: z
          .string()
          .regex(/^-?\d+(\.\d+)?$/, 'a number in a string')
          .refine((v) => Number.isFinite(Number(v)), 'a finite number in a string')
          .nullable()
          .optional(),
      }),
    )
    .min(1),
});

/** Both shapes' schemas, for tests that generate messages from them (test/properties/). */
export const READER_MESSAGE_SCHEMAS = { canonical, cs463 } as const;

function describe(error: z.ZodError): string {
  const issue = error.issues[0]!;
  const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '');
  return `${path || '(root)'}: ${issue.message}`.replace(/[\r\n]+/g, ' ');
}

export function parseReaderMessage(value: Buffer | null): ParsedMessage {
  if (!value || value.length === 0) return { ok: false, reason: 'empty message' };
  let json: unknown;
  try {
    json = JSON.parse(value.toString('utf8'));
  } catch {
    return { ok: false, reason: 'not valid JSON' };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { ok: false, reason: 'not a JSON object' };
  if ('reader_id' in json || 'reads' in json) {
    const parsed = canonical.safeParse(json);
    if (!parsed.success) return { ok: false, reason: `canonical shape: ${describe(parsed.error)}` };
    return {
      ok: true,
      readerId: parsed.data.reader_id,
      reads: parsed.data.reads.map((r) => ({ tag_type: r.tag_type, value: r.value, observedUs: r.observed_at, rssi: r.rssi ?? null, capturePoint: r.capture_point })),
    };
  }
  if ('rfidReaderName' in json || 'tags' in json) {
    const parsed = cs463.safeParse(json);
    if (!parsed.success) return { ok: false, reason: `CS463 shape: ${describe(parsed.error)}` };
    return {
      ok: true,
      readerId: parsed.data.rfidReaderName,
      reads: parsed.data.tags.map((t) => ({ tag_type: 'rfid', value: t.epc, observedUs: t.timeStampOfRead, rssi: t.rssi == null ? null : Number(t.rssi), capturePoint: t.capturePointName })),
    };
  }
  return { ok: false, reason: 'matches neither the canonical nor the CS463 shape' };
}
