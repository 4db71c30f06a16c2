/**
 * The metric names a PromQL expression reads. Enough PromQL for dashboards: functions and
 * aggregations (`rate(`, `sum by (label) (`), label matchers, ranges, numbers, strings and
 * Grafana's `$variables` are told apart from metric names.
 */

const KEYWORDS = new Set([
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan',
]);

export function promqlMetricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // strings
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // label lists
    .replace(/\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?/g, ' ') // Grafana variables
    .replace(/\b\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*\b/g, ' ') // durations (offset 1h30m)
    .replace(/\b\d+(\.\d+)?([eE][+-]?\d+)?\b/g, ' '); // numbers
  const names = new Set<string>();
  for (const match of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = match[0];
    const rest = stripped.slice(match.index + word.length);
    if (/^\s*\(/.test(rest)) continue; // a function or an aggregation
    if (KEYWORDS.has(word.toLowerCase())) continue;
    names.add(word);
  }
  return [...names];
}
