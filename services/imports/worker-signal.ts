/**
 * A job posted in this process wakes this process's import worker at once (others find it at
 * their next poll).
 */
const listeners = new Set<() => void>();

export function onImportPosted(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function importPosted(): void {
  for (const listener of listeners) listener();
}
