import { z } from 'zod';
import { assetViewSchema } from '../domain/assets/schema.js';
import { locationViewSchema } from '../domain/locations/schema.js';

/**
 * The column layout of an exported list and the formula rule, shared by the export (CSV and XLSX
 * answers of the lists) and the import, which reads an export back (docs/api.md, "Export"):
 *
 * - columns are the item's fields in the order of its JSON schema; a nested object with fixed
 *   fields is flattened with a dot (`actor.type`); an object with free keys (`metadata`, an audit
 *   event's `changes`) and any other array is one column holding its JSON;
 * - an asset's or location's `tags` is one column `type:value`, joined by `|` (formatTagsCell);
 * - a text cell that begins with `=`, `+`, `-`, `@`, `'`, a tab or a carriage return is written with
 *   a leading `'` (neutraliseFormula); the import removes one leading `'` from every text cell
 *   (restoreFormula), so every value survives the round trip.
 *
 * The API: neutraliseFormula, restoreFormula, formatTagsCell, parseTagsCell, assetColumns,
 * locationColumns; and, for the export, exportColumns and rowCells.
 */

/** What a text cell may begin with that a spreadsheet would read as a formula (and `'`, so that the import's removal is exact). */
const FORMULA_START = /^[=+\-@'\t\r]/;

/** `text` as a cell: with a leading `'` when it begins like a formula (or with `'`). */
export function neutraliseFormula(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** The value of a text cell as read back: one leading `'` removed, whatever follows it. */
export function restoreFormula(text: string): string {
  return text.startsWith("'") ? text.slice(1) : text;
}

/** A tag as a tags cell names it. */
export interface TagRef {
  tag_type: string;
  value: string;
}

const escapeTagValue = (value: string) => value.replace(/[\\|]/g, (c) => `\\${c}`);

/**
 * The `tags` cell: `type:value` per tag, in the view's order, joined by `|`. A `\` or `|` inside a
 * value is written `\\` or `\|` (a type never holds either, nor `:`); no tags is an empty cell.
 */
export function formatTagsCell(tags: ReadonlyArray<TagRef>): string {
  return tags.map((t) => `${t.tag_type}:${escapeTagValue(t.value)}`).join('|');
}

/** A tags cell read back: its tags, or why it cannot be read. */
export type ParsedTagsCell = { tags: TagRef[] } | { error: string };

/**
 * The tags of a `tags` cell (formatTagsCell's form): an empty cell is no tag. Each entry is
 * `type:value`, split at its first `:`; in a value `\|` is `|` and `\\` is `\`. An entry without a
 * type or a value, or a `\` before anything else, is an error (its message names the entry).
 */
export function parseTagsCell(cell: string): ParsedTagsCell {
  if (cell === '') return { tags: [] };
  const entries: string[] = [];
  let current = '';
  for (let i = 0; i < cell.length; i++) {
    const c = cell[i]!;
    if (c === '\\') {
      const next = cell[i + 1];
      if (next !== '\\' && next !== '|') return { error: `tags: a \\ must be followed by \\ or | (entry ${entries.length + 1})` };
      current += c + next;
      i++;
    } else if (c === '|') {
      entries.push(current);
      current = '';
    } else {
      current += c;
    }
  }
  entries.push(current);
  const tags: TagRef[] = [];
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const tagType = colon < 0 ? '' : entry.slice(0, colon);
    const value = colon < 0 ? '' : entry.slice(colon + 1).replace(/\\([\\|])/g, '$1');
    if (tagType === '' || value === '') return { error: `tags: entry ${i + 1} must be type:value, such as rfid:E200341201` };
    tags.push({ tag_type: tagType, value });
  }
  return { tags };
}

/** A JSON Schema, as the OpenAPI document holds an item's. */
export type JsonSchema = Record<string, unknown>;

/** How a column's cell is made from its value. */
export type ColumnKind = 'value' | 'json' | 'tags';

export interface ExportColumn {
  /** The header: the field's name, a nested field's path joined by `.`. */
  name: string;
  /** The field's path in the item. */
  path: readonly string[];
  kind: ColumnKind;
}

/** The schema itself, or its non-null branch when it is `anyOf [X, null]`. */
function nonNull(schema: JsonSchema): JsonSchema {
  const anyOf = schema.anyOf as JsonSchema[] | undefined;
  if (!anyOf) return schema;
  const branches = anyOf.filter((s) => s.type !== 'null');
  return branches.length === 1 ? branches[0]! : schema;
}

const isTagArray = (items: JsonSchema | undefined) => {
  const properties = items?.properties as Record<string, unknown> | undefined;
  return properties !== undefined && 'tag_type' in properties && 'value' in properties;
};

/**
 * The columns of an item whose JSON Schema is `item` (an object with `properties`): its fields in
 * the schema's order, a nested object with fixed fields flattened with a dot, an object with free
 * keys or an array one column of JSON, an array of tags one tags cell.
 */
export function exportColumns(item: JsonSchema, prefix: readonly string[] = []): ExportColumn[] {
  const properties = (nonNull(item).properties ?? {}) as Record<string, JsonSchema>;
  return Object.entries(properties).flatMap(([field, raw]): ExportColumn[] => {
    const path = [...prefix, field];
    const name = path.join('.');
    const schema = nonNull(raw);
    if (schema.type === 'array') return [{ name, path, kind: isTagArray(schema.items as JsonSchema | undefined) ? 'tags' : 'json' }];
    if (schema.type === 'object') {
      const fixed = schema.properties !== undefined && schema.additionalProperties === false;
      return fixed ? exportColumns(schema, path) : [{ name, path, kind: 'json' }];
    }
    return [{ name, path, kind: 'value' }];
  });
}

/** A cell: text (neutralised), a number, a boolean, or null for an empty cell. */
export type Cell = string | number | boolean | null;

function valueAt(item: Record<string, unknown>, path: readonly string[]): unknown {
  let value: unknown = item;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return null;
    value = (value as Record<string, unknown>)[key];
  }
  return value ?? null;
}

/** A value as its cell: text as the JSON shows it (neutralised), numbers and booleans as such, null empty. */
function cellOf(column: ExportColumn, value: unknown): Cell {
  if (value === null) return null;
  if (column.kind === 'tags') return neutraliseFormula(formatTagsCell(value as TagRef[]));
  if (column.kind === 'json') return neutraliseFormula(JSON.stringify(value));
  if (typeof value === 'string') return neutraliseFormula(value);
  if (typeof value === 'number' || typeof value === 'boolean') return value;
  return neutraliseFormula(JSON.stringify(value));
}

/** The cells of one item, in the columns' order. */
export function rowCells(columns: readonly ExportColumn[], item: Record<string, unknown>): Cell[] {
  const cells = new Array<Cell>(columns.length);
  for (let i = 0; i < columns.length; i++) {
    const column = columns[i]!;
    cells[i] = cellOf(column, column.path.length === 1 ? (item[column.path[0]!] ?? null) : valueAt(item, column.path));
  }
  return cells;
}

const namesOf = (schema: z.ZodType) => Object.freeze(exportColumns(z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as JsonSchema).map((c) => c.name));

/** The columns, in order, of an exported asset (`GET /assets`): what an asset import reads. */
export const assetColumns: readonly string[] = namesOf(assetViewSchema);

/** The columns, in order, of an exported location (`GET /locations`): what a location import reads. */
export const locationColumns: readonly string[] = namesOf(locationViewSchema);
