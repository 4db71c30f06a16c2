import { describe, expect, it } from 'vitest';
import { fieldWords, humanMessage, refusalWords } from '../../services/api/console/web/src/messages.js';

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

describe('refusalWords', () => {
  it('a key taken by another record and a deleted parent (docs/api.md "Restoring") in words; any other detail as the API said it', () => {
    expect(refusalWords('external_key "PAL-7" is already in use by another asset')).toBe('Another asset has the key PAL-7 now. Rename or delete that asset first, then try again.');
    expect(refusalWords('external_key "DOCK-3" is already used by another location')).toBe('Another location has the key DOCK-3 now. Rename or delete that location first, then try again.');
    expect(refusalWords('parent location "SITE-1" (id 4) is deleted; restore the parent first')).toBe('Its parent location SITE-1 is deleted. Restore the parent first.');
    expect(refusalWords('parent location (id 4) is deleted; restore the parent first')).toBe('Its parent location #4 is deleted. Restore the parent first.');
    expect(refusalWords('Location not found')).toBe('Location not found');
  });
});
