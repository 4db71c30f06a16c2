/**
 * CLI output. With --json: exactly one JSON document on stdout and nothing else there. Without:
 * a readable table, and the lines a person needs next to it (a legend, a token on its own line).
 */
export interface Output {
  json: boolean;
  /** The command's result: JSON under --json, a table of `columns` otherwise. */
  print(value: unknown, columns?: string[]): void;
  /** A line for people reading the table; nothing under --json. */
  note(text: string): void;
  /** A line on stdout as is, whatever the mode (for `--token-only` and the like). */
  line(text: string): void;
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

export function table(rows: Array<Record<string, unknown>>, columns?: string[]): string {
  const cols = columns ?? Object.keys(rows[0] ?? {});
  if (cols.length === 0) return '(none)';
  const cells = rows.map((row) => cols.map((c) => cell(row[c])));
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(cols), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

export function createOutput(json: boolean, write: (text: string) => void = (text) => process.stdout.write(text)): Output {
  return {
    json,
    print(value, columns) {
      if (json) {
        write(`${JSON.stringify(value, null, 2)}\n`);
        return;
      }
      const rows = Array.isArray(value) ? (value as Array<Record<string, unknown>>) : [value as Record<string, unknown>];
      write(`${rows.length === 0 ? '(none)' : table(rows, columns)}\n`);
    },
    note(text) {
      if (!json) write(`${text}\n`);
    },
    line(text) {
      write(`${text}\n`);
    },
  };
}
