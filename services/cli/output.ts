/** CLI output: exactly one JSON document with --json, a readable table otherwise. */
export interface Output {
  json: boolean;
  print(value: unknown, columns?: string[]): void;
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

export function createOutput(json: boolean): Output {
  return {
    json,
    print(value, columns) {
      if (json) {
        process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
        return;
      }
      const rows = Array.isArray(value) ? (value as Array<Record<string, unknown>>) : [value as Record<string, unknown>];
      process.stdout.write(`${rows.length === 0 ? '(none)' : table(rows, columns)}\n`);
    },
  };
}
