/**
 * A response body that is already JSON text, sent as is. Read-model views are built as JSON by
 * Postgres (row_to_json / json_agg), so a page of views never becomes rows, Dates and objects in
 * the process only to be serialized again: that round trip was most of a list request's CPU.
 */
export class JsonText {
  constructor(readonly text: string) {}
}

type JsonField = JsonText | string | number | boolean | null;

/** `{"a":…,"b":…}` in the given key order; JsonText values are embedded verbatim. */
export function jsonObject(fields: Record<string, JsonField>): JsonText {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(fields)) {
    parts.push(`${JSON.stringify(key)}:${value instanceof JsonText ? value.text : JSON.stringify(value)}`);
  }
  return new JsonText(`{${parts.join(',')}}`);
}
