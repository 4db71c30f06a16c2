import { describe, expect, it } from 'vitest';
import { assetColumns, locationColumns } from '../../shared/export/columns.js';
import { fieldWords, humanMessage, IMPORT_COLUMNS, importFileMessage, importRowMessage, refusalWords } from '../../services/api/console/web/src/messages.js';

/** The console's words for the API's field errors (docs/console.md, "Messages"). */

describe('humanMessage', () => {
  it('a key pattern in words, the field named in words', () => {
    expect(humanMessage({ field: 'location_external_key', code: 'invalid_value', message: 'location_external_key must match ^[A-Za-z0-9-]+$' })).toBe(
      'A location key may contain only letters, digits and hyphens.',
    );
    expect(humanMessage({ field: 'external_key', code: 'invalid_value', message: 'external_key must match ^[A-Za-z0-9-]+$' })).toBe('A key may contain only letters, digits and hyphens.');
  });

  it('each code of docs/api.md "Errors" has its sentence', () => {
    expect(humanMessage({ field: 'name', code: 'required', message: 'name is required' })).toBe('Name is required.');
    expect(humanMessage({ field: 'name', code: 'too_short', message: 'name must be at least 1 character long', params: { min_length: 1 } })).toBe('Name cannot be empty.');
    expect(humanMessage({ field: 'name', code: 'too_long', message: 'name must be at most 255 characters long', params: { max_length: 255 } })).toBe('Name may be at most 255 characters long.');
    expect(humanMessage({ field: 'limit', code: 'too_large', message: 'limit must be at most 200', params: { max: 200 } })).toBe('Page size must be at most 200.');
    expect(humanMessage({ field: 'parent_id', code: 'fk_not_found', message: 'parent_id does not reference an existing record' })).toBe('No parent location has this id (or it was deleted).');
    expect(humanMessage({ field: 'location.external_key', code: 'fk_not_found', message: 'x' })).toBe('No location has this key (or it was deleted).');
    expect(humanMessage({ field: 'event_types', code: 'too_short', message: 'event_types must be at least 1 character long', params: { min_length: 1 } })).toBe('Choose at least one event.');
  });

  it('a readable message of the API stays, with its field in words; a technical one does not', () => {
    expect(humanMessage({ field: 'metadata', code: 'invalid_value', message: 'metadata must be a JSON object' })).toBe('Metadata must be a JSON object.');
    expect(humanMessage({ field: 'valid_to', code: 'invalid_value', message: 'valid_to must be after valid_from' })).toBe('Valid to date must be after valid from date.');
    expect(humanMessage({ field: 'name', code: 'invalid_value', message: 'name must not contain the NUL character (\\u0000)' })).toBe('Name is not valid.');
    expect(humanMessage({ field: 'sort', code: 'invalid_value', message: 'unknown sort field: colour_code' })).toBe('Order is not valid.');
  });

  it('an unknown code falls back to a plain sentence naming the field in words', () => {
    expect(humanMessage({ field: 'not_seen_after_seconds', code: 'brand_new_code', message: 'not_seen_after_seconds ^x$' })).toBe('The not-seen delay was refused.');
    expect(fieldWords('event_types[2]')).toBe('events');
    expect(fieldWords('some_new_field')).toBe('some new field');
  });
});

describe('an alert rule\'s fields (docs/api.md "Alerts")', () => {
  it('the threshold in minutes, hours or days, never seconds; the assets and kind in words', () => {
    expect(humanMessage({ field: 'threshold_seconds', code: 'too_small', message: 'threshold_seconds must be at least 60', params: { min: 60 } })).toBe('The threshold must be at least 1 minute.');
    expect(humanMessage({ field: 'threshold_seconds', code: 'too_large', message: 'threshold_seconds must be at most 2592000', params: { max: 2_592_000 } })).toBe('The threshold must be at most 30 days.');
    expect(humanMessage({ field: 'threshold_seconds', code: 'required', message: 'threshold_seconds is required for a not_seen rule' })).toBe('The threshold is required for this kind of rule.');
    expect(humanMessage({ field: 'threshold_seconds', code: 'invalid_value', message: 'threshold_seconds is only for dwell_exceeded and not_seen rules, not left' })).toBe(
      'A threshold is only for the kinds Stayed too long and Not seen.',
    );
    expect(humanMessage({ field: 'asset_ids', code: 'fk_not_found', message: 'asset_ids 7 does not reference an existing asset' })).toBe(
      'One of the chosen assets does not exist any more (or was deleted): remove it and save again.',
    );
    expect(humanMessage({ field: 'asset_ids', code: 'too_short', message: 'asset_ids must have at least 1 item', params: { min_length: 1 } })).toBe('Choose at least one asset.');
    expect(humanMessage({ field: 'kind', code: 'invalid_value', message: 'x', params: { allowed_values: ['entered', 'left'] } })).toBe('Kind of rule must be one of: entered, left.');
  });

  it('the 100-rules limit in words', () => {
    expect(refusalWords('An organization has at most 100 alert rules; delete one first')).toBe('This organization already has 100 alert rules, the most it may have. Delete a rule (or change one) first.');
  });
});

describe('refusalWords', () => {
  it('a key taken by another record and a deleted parent (docs/api.md "Restoring") in words; any other detail as the API said it', () => {
    expect(refusalWords('external_key "PAL-7" is already in use by another asset')).toBe('Another asset has the key PAL-7 now. Rename or delete that asset first, then try again.');
    expect(refusalWords('external_key "DOCK-3" is already used by another location')).toBe('Another location has the key DOCK-3 now. Rename or delete that location first, then try again.');
    expect(refusalWords('parent location "SITE-1" (id 4) is deleted; restore the parent first')).toBe('Its parent location SITE-1 is deleted. Restore the parent first.');
    expect(refusalWords('parent location (id 4) is deleted; restore the parent first')).toBe('Its parent location #4 is deleted. Restore the parent first.');
    expect(refusalWords('Location not found')).toBe('Location not found');
  });
});

describe('an import\'s messages (docs/console.md, "Import")', () => {
  it('a refused file: each column as the file spells it, the columns the import reads, or the file\'s own reason', () => {
    expect(importFileMessage({ field: 'Colour', code: 'unknown_field', message: 'unknown column "Colour": the columns are id, …' }, 'assets')).toBe(
      'The file has a column "Colour" that assets do not have; the columns an import reads are: external_key, name, description, is_active, valid_from, valid_to, metadata, tags.',
    );
    expect(importFileMessage({ field: 'external_key', code: 'required', message: 'the file has no external_key column' }, 'locations')).toBe('The file has no "external_key" column: every row needs its key.');
    expect(importFileMessage({ field: 'name', code: 'invalid_value', message: 'column name appears more than once' }, 'assets')).toBe('The column "name" appears more than once in the header.');
    expect(importFileMessage({ field: 'file', code: 'invalid_value', message: 'The file is neither CSV (UTF-8 text) nor XLSX' }, 'assets')).toBe('The file is neither CSV (UTF-8 text) nor XLSX.');
  });

  it('a row\'s error in words: the import\'s own codes and sentences', () => {
    expect(importRowMessage({ row: 2, field: 'is_active', code: 'invalid_value', message: 'is_active must be true or false' } as never)).toBe('Active must be true or false.');
    expect(importRowMessage({ field: 'parent_external_key', code: 'conflict', message: 'parent_external_key "A-1" makes a cycle with other rows of the file' })).toBe(
      'Parent location "A-1" makes a cycle with other rows of the file.',
    );
    expect(importRowMessage({ field: 'parent_external_key', code: 'fk_not_found', message: 'x' })).toBe('No parent location has this key (or it was deleted).');
    expect(importRowMessage({ field: 'row', code: 'invalid_value', message: 'the row has 5 cells; the header has 3' })).toBe('The row has 5 cells; the header has 3.');
    expect(importRowMessage({ field: 'name', code: 'too_long', message: 'name must be at most 65536 characters long' })).toBe('Name is too long.');
    expect(importRowMessage({ field: 'row', code: 'conflict', message: 'tag_type ^x$' })).toBe('Row conflicts with another record.');
  });

  it('the columns an import reads are the export\'s, in its order (the template\'s header row)', () => {
    for (const [columns, exported] of [
      [IMPORT_COLUMNS.assets, assetColumns],
      [IMPORT_COLUMNS.locations, locationColumns],
    ] as const) {
      expect(exported.filter((c) => (columns as readonly string[]).includes(c))).toEqual([...columns]);
    }
  });
});
