import { useEffect, useRef, useState } from 'preact/hooks';
import { namesByKey } from '../api.js';

/**
 * The names of the records whose keys a page shows (docs/console.md, "Names first"), for pages
 * whose rows keep coming (Live reads) or are read again (Readers, Unknown reads): only keys not
 * asked yet are fetched, all of them at once, one request per kind (`namesByKey`), never one per
 * row. A key asked once is not asked again, found or not (a record of no name shows its key).
 */
export function useNames(kind: 'assets' | 'locations', keys: Array<string | null | undefined>): Map<string, string> {
  const [names, setNames] = useState<Map<string, string>>(() => new Map());
  const asked = useRef(new Set<string>());
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  const missing = [...new Set(keys.filter((key): key is string => typeof key === 'string' && key !== '' && !asked.current.has(key)))];
  const signature = missing.join('\n');
  useEffect(() => {
    if (missing.length === 0) return;
    for (const key of missing) asked.current.add(key);
    namesByKey(kind, missing).then(
      (found) => {
        if (mounted.current && found.size > 0) setNames((before) => new Map([...before, ...found]));
      },
      // Without names the keys show alone; the page's own refusal (if any) says why.
      () => undefined,
    );
  }, [signature]);
  return names;
}
