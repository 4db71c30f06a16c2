/** A /metrics page (Prometheus text format) read into samples, for tests. */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export class MetricsPage {
  constructor(
    readonly samples: readonly Sample[],
    /** Metric family → its `# TYPE` (counter, gauge, histogram...). */
    readonly types: ReadonlyMap<string, string>,
  ) {}

  /** The samples of `name` whose labels include `labels`. */
  matching(name: string, labels: Record<string, string> = {}): Sample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** The sum of the samples of `name` whose labels include `labels` (0 when none). */
  sum(name: string, labels: Record<string, string> = {}): number {
    return this.matching(name, labels).reduce((total, s) => total + s.value, 0);
  }

  /** Every sample name on the page (histograms as their `_bucket`, `_sum` and `_count`). */
  names(): Set<string> {
    return new Set(this.samples.map((s) => s.name));
  }
}

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): MetricsPage {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(LABEL)) labels[key!] = value!.replace(/\\(.)/g, (_all, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return new MetricsPage(samples, types);
}

export async function scrape(opsUrl: string): Promise<MetricsPage> {
  const response = await fetch(`${opsUrl}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return parseMetrics(await response.text());
}
