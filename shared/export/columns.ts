/**
 * Stand-in, until the export's own module lands: the few names the import reads, with the rules
 * docs/api.md states ("Export" and "Import"). The export's module replaces this file whole.
 */

/** Text a spreadsheet would take for a formula: a leading `=`, `+`, `-`, `@`, `'`, tab or carriage return. */
const FORMULA_START = /^[=+\-@'\t\r]/;

/** A text value as the export writes it: one leading `'` before formula-looking text. */
export function neutraliseFormula(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** A text cell as the import reads it: one leading `'` removed. */
export function restoreFormula(text: string): string {
  return text.startsWith("'") ? text.slice(1) : text;
}

export interface TagCell {
  tag_type: string;
  value: string;
}

/** An asset's or location's tags as one cell: `type:value` joined by `|`. */
export function formatTagsCell(tags: readonly TagCell[]): string {
  return tags.map((t) => `${t.tag_type}:${t.value}`).join('|');
}

/** A tags cell read back: each `type:value` (the type ends at the first `:`); blank parts are skipped. */
export function parseTagsCell(cell: string): TagCell[] {
  return cell
    .split('|')
    .filter((part) => part.trim() !== '')
    .map((part) => {
      const colon = part.indexOf(':');
      return colon < 0 ? { tag_type: part, value: '' } : { tag_type: part.slice(0, colon), value: part.slice(colon + 1) };
    });
}

/** The columns of an exported asset, in order (the asset view's fields). */
export const assetColumns = [
  'id', 'external_key', 'name', 'description', 'location_id', 'location_external_key', 'is_active',
  'valid_from', 'valid_to', 'metadata', 'created_at', 'updated_at', 'deleted_at', 'tags',
] as const;

/** The columns of an exported location, in order (the location view's fields). */
export const locationColumns = [
  'id', 'external_key', 'name', 'description', 'parent_id', 'parent_external_key', 'is_active',
  'valid_from', 'valid_to', 'created_at', 'updated_at', 'deleted_at', 'tags',
] as const;
