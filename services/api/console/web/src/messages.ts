/**
 * The words a person reads for a refused field (docs/console.md, "Messages"): the API's field
 * errors (`{field, code, message, params}`, docs/api.md "Errors") name fields by their JSON keys
 * and quote patterns; the console shows neither. One mapping, used by every form and filter.
 */

export interface ApiFieldError {
  field: string;
  code?: string;
  message: string;
  params?: Record<string, unknown>;
}

/** Fields by their JSON key (or a query parameter), in words. */
const FIELD_WORDS: Record<string, string> = {
  external_key: 'key',
  new_external_key: 'new key',
  name: 'name',
  description: 'description',
  metadata: 'metadata',
  is_active: 'active',
  valid_from: 'valid from date',
  valid_to: 'valid to date',
  parent_id: 'parent location',
  parent_external_key: 'parent location',
  location_id: 'location',
  location_external_key: 'location key',
  location: 'location',
  asset_id: 'asset',
  asset_external_key: 'asset key',
  tag_type: 'tag type',
  value: 'tag value',
  tags: 'tags',
  q: 'search',
  limit: 'page size',
  offset: 'page start',
  sort: 'order',
  since: 'start time',
  until: 'end time',
  actor_type: 'who',
  actor_id: 'key or user id',
  resource_type: 'resource',
  resource_id: 'resource id',
  action: 'action',
  include_deleted: 'include deleted',
  url: 'URL',
  event_types: 'events',
  not_seen_after_seconds: 'not-seen delay',
  // An alert rule's (docs/api.md "Alerts").
  kind: 'kind of rule',
  threshold_seconds: 'threshold',
  asset_ids: 'assets',
  rule_id: 'rule',
  status: 'status',
  reader_id: 'reader id',
  capture_point: 'capture point',
  email: 'email',
  role: 'role',
  password: 'password',
  current_password: 'current password',
  new_password: 'new password',
  // An import's file and its rows (docs/api.md "Import").
  file: 'file',
  row: 'row',
  resource: 'kind of record',
};

/** Fields that hold a list: too short means too few items. */
const LIST_FIELDS = new Set(['event_types', 'tags', 'asset_ids']);

/** A field in words: `location.external_key` → "location key", `event_types[1]` → "events". */
export function fieldWords(field: string): string {
  const plain = field.replace(/\[\d+\]/g, '');
  if (FIELD_WORDS[plain]) return FIELD_WORDS[plain];
  const parts = plain.split('.');
  const last = parts[parts.length - 1] ?? plain;
  if (parts.length > 1 && last === 'external_key') return `${fieldWords(parts.slice(0, -1).join('.'))} key`;
  return FIELD_WORDS[last] ?? last.replace(/_/g, ' ');
}

const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/** The API's pattern of every external key (docs/api.md, "Ids"). */
const KEY_PATTERN = '^[A-Za-z0-9-]+$';

/** Whether a message quotes a pattern, an escape or a JSON key (which a person should not read). */
function technical(message: string): boolean {
  return /\^.*\$/.test(message) || /\\u[0-9a-f]{4}/i.test(message) || /\b[a-z]+_[a-z_]+\b/.test(message);
}

/** A field error of the API in words a person reads: no pattern, no code, no JSON key. */
export function humanMessage(error: ApiFieldError): string {
  const words = fieldWords(error.field);
  const Words = capital(words);
  const number = (name: string) => (typeof error.params?.[name] === 'number' ? (error.params[name] as number) : null);
  // The API's own sentence, with the field named in words, where it says nothing technical.
  const own = () => {
    const top = error.field.replace(/\[\d+\]/g, '');
    const start = error.message.startsWith(`${top} `) ? `${Words}${error.message.slice(top.length)}` : error.message;
    // Other fields it names, in words too (`valid_to must be after valid_from`).
    const rest = start.replace(/\b[a-z]+(?:_[a-z]+)+\b/g, (key) => FIELD_WORDS[key] ?? key);
    return technical(rest) ? null : `${capital(rest)}${/[.!?]$/.test(rest) ? '' : '.'}`;
  };
  // A rule's threshold is typed in minutes, hours or days: its bounds are said so, never in seconds.
  if (error.field === 'threshold_seconds' && (error.code === 'too_small' || error.code === 'too_large')) {
    const bound = number(error.code === 'too_small' ? 'min' : 'max');
    if (bound !== null) return `The threshold must be ${error.code === 'too_small' ? 'at least' : 'at most'} ${durationInWords(bound)}.`;
  }
  if (error.field === 'threshold_seconds' && error.code === 'required') return 'The threshold is required for this kind of rule.';
  if (error.field === 'threshold_seconds' && error.code === 'invalid_value') return 'A threshold is only for the kinds Stayed too long and Not seen.';
  if (error.field.replace(/\[\d+\]/g, '') === 'asset_ids' && error.code === 'fk_not_found') return 'One of the chosen assets does not exist any more (or was deleted): remove it and save again.';
  switch (error.code) {
    case 'required':
      return `${Words} is required.`;
    case 'too_short': {
      const min = number('min_length') ?? 1;
      if (LIST_FIELDS.has(error.field)) return `Choose at least ${min === 1 ? 'one' : min} ${min === 1 ? words.replace(/s$/, '') : words}.`;
      return min <= 1 ? `${Words} cannot be empty.` : `${Words} must be at least ${min} characters long.`;
    }
    case 'too_long': {
      const max = number('max_length');
      return max === null ? `${Words} is too long.` : LIST_FIELDS.has(error.field) ? `Choose at most ${max} ${words}.` : `${Words} may be at most ${max} characters long.`;
    }
    case 'too_small':
      return number('min') === null ? `${Words} is too small.` : `${Words} must be at least ${number('min')}.`;
    case 'too_large':
      return number('max') === null ? `${Words} is too large.` : `${Words} must be at most ${number('max')}.`;
    case 'fk_not_found':
      // A field given by key (`parent_external_key`, an import's column) names a key, whatever its words.
      return `No ${words.replace(/ key$/, '')} has this ${/key$/.test(words) || /external_key$/.test(error.field) ? 'key' : 'id'} (or it was deleted).`;
    case 'unknown_field':
      return `${Words} is not accepted here.`;
    case 'ambiguous_fields':
      return `Give the ${words} one way only (by id or by key, not both).`;
    case 'read_only':
      return `${Words} cannot be changed here.`;
    case 'conflict':
      return own() ?? `${Words} conflicts with another record.`;
    case 'invalid_value': {
      if (error.message.includes(KEY_PATTERN)) return `${capital(words.endsWith('key') ? `a ${words}` : `the ${words}`)} may contain only letters, digits and hyphens.`;
      const allowed = error.params?.allowed_values;
      if (Array.isArray(allowed)) return `${Words} must be one of: ${allowed.join(', ')}.`;
      return own() ?? `${Words} is not valid.`;
    }
    default:
      return own() ?? `The ${words} was refused.`;
  }
}

/**
 * The words for a refusal without field errors whose detail names a key field (docs/console.md,
 * "Messages"): a key taken by another record, a parent that is deleted (docs/api.md,
 * "Restoring"). Any other detail is the API's own sentence, unchanged.
 */
export function refusalWords(detail: string): string {
  const rules = /^An organization has at most (\d+) alert rules; delete one first$/.exec(detail);
  if (rules) return `This organization already has ${rules[1]} alert rules, the most it may have. Delete a rule (or change one) first.`;
  const taken = /^external_key "([^"]*)" is already (?:in use by|used by) another (asset|location)$/.exec(detail);
  if (taken) return `Another ${taken[2]} has the key ${taken[1]} now. Rename or delete that ${taken[2]} first, then try again.`;
  const parent = /^parent location (?:"([^"]*)" )?\(id (\d+)\) is deleted; restore the parent first$/.exec(detail);
  if (parent) return `Its parent location ${parent[1] ?? `#${parent[2]}`} is deleted. Restore the parent first.`;
  return detail;
}

/** Seconds as a person says them: 60 → "1 minute", 2592000 → "30 days". */
function durationInWords(seconds: number): string {
  const [unit, size] = seconds % 86_400 === 0 ? ['day', 86_400] : seconds % 3600 === 0 ? ['hour', 3600] : seconds % 60 === 0 ? ['minute', 60] : ['second', 1];
  const n = seconds / (size as number);
  return `${n} ${unit as string}${n === 1 ? '' : 's'}`;
}

/** An import's columns in words: the file's header names them as they are, so a person can find them. */
const column = (field: string) => `"${field}"`;

/**
 * Why a whole file was refused at once (`400` on `POST /imports`, docs/api.md "Import"): a column
 * the resource does not have, one given twice, no `external_key` column, or a file that is not
 * CSV or XLSX. The columns are named as the file's header spells them.
 */
export function importFileMessage(error: ApiFieldError, resource: 'assets' | 'locations'): string {
  if (error.code === 'unknown_field') return `The file has a column ${column(error.field)} that ${resource} do not have; the columns an import reads are: ${IMPORT_COLUMNS[resource].join(', ')}.`;
  if (error.code === 'required' && error.field === 'external_key') return 'The file has no "external_key" column: every row needs its key.';
  if (error.code === 'invalid_value' && error.field !== 'file') return `The column ${column(error.field)} appears more than once in the header.`;
  // The file's own refusal (not CSV nor XLSX, an XLSX that expands too far) is plain words already.
  return humanMessage(error);
}

/** One refused row's error, beside its row and column (the column in words; the API's sentence where it is plain). */
export function importRowMessage(error: ApiFieldError): string {
  return humanMessage(error);
}

/** The columns an import reads, as an export writes them (docs/api.md "Import"), for the messages and the template. */
export const IMPORT_COLUMNS = {
  assets: ['external_key', 'name', 'description', 'is_active', 'valid_from', 'valid_to', 'metadata', 'tags'],
  locations: ['external_key', 'name', 'description', 'parent_external_key', 'is_active', 'valid_from', 'valid_to', 'tags'],
} as const;
