import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { databaseRoleNames } from '../../shared/db/database-roles.js';
import { apiRoutes } from '../../services/api/routes.js';
import { buildProgram } from '../../services/cli/program.js';
import { loadCommandModules } from '../../services/cli/registry.js';
import { handheldRoutes } from '../../services/ingest/handheld-routes.js';
import { ingestMetrics } from '../../services/ingest/metrics.js';
import { metricsRegistry, projectionLagRegistry } from '../../services/ops/metrics.js';
import '../../services/ingest/kafka/consumer.js';
import '../../services/ingest/mqtt/subscriber.js';
import '../../services/api/app/live-reads.js';
import '../../services/webhooks/metrics.js';

/**
 * The documentation says what the code does (issue 15), checked cheaply: the commands and options
 * it names exist (and every command is in the CLI reference), the variables of the operations
 * guide are exactly those the configuration reads, every endpoint has its place in the guides,
 * the metrics it names are registered, and every relative link resolves, anchors included.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCS = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The text without its fenced code blocks (links and headings there are not markdown). */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of prose(text).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = slug(match[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    result.add(n === 0 ? base : `${base}-${n}`);
  }
  return result;
}

/** The section of a markdown text under a heading, up to the next heading of the same level or above. */
function section(text: string, heading: string): string {
  const lines = text.split('\n');
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start < 0) throw new Error(`no heading "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  const end = lines.findIndex((line, i) => i > start && new RegExp(`^#{1,${level}} `).test(line));
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

describe('the CLI in the docs', async () => {
  const program = buildProgram(await loadCommandModules(), { version: '0.0.0', onCommand: () => undefined });
  const GLOBAL_OPTIONS = ['--help', '-h', '--version', '-V'];

  /** The command a list of words selects, and the words left over. */
  function resolveCommand(words: string[]): { command: Command; path: string[]; rest: string[] } {
    let command = program;
    const found: string[] = [];
    let i = 0;
    for (; i < words.length; i++) {
      const sub = command.commands.find((c) => c.name() === words[i]);
      if (!sub) break;
      command = sub;
      found.push(words[i]!);
    }
    return { command, path: found, rest: words.slice(i) };
  }

  const optionsOf = (command: Command) => command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)));

  /**
   * Every `npx tracking …` invocation of a text, cut at the end of the shell command, with command
   * substitutions in its arguments blanked. A line whose output shown below it is an error (a
   * typo on purpose) is skipped.
   */
  function invocations(text: string): string[][] {
    const lines = text.replace(/\\\n\s*/g, ' ').split('\n');
    return lines.flatMap((line, i) =>
      lines[i + 1]?.startsWith('error: ')
        ? []
        : [...line.replace(/\$\([^)]*\)/g, 'X').matchAll(/npx tracking((?: +[^\s|;&)`#]+)*)/g)].map((m) =>
            m[1]!
              .trim()
              .split(/ +/)
              .filter(Boolean)
              .map((w) => w.replace(/^["']|["'.,]+$/g, '')),
          ),
    );
  }

  it('every command and option the docs name exists', () => {
    const problems: string[] = [];
    let count = 0;
    for (const file of DOCS) {
      for (let words of invocations(read(file))) {
        count++;
        if (words[0] === 'help') words = [...words.slice(1), '--help'];
        const { command, path: found, rest } = resolveCommand(words);
        const named = rest.filter((w) => /^[a-z][a-z-]*$/.test(w));
        // A group must be followed by one of its commands (`npx tracking keys` alone prints help).
        if (found.length === 1 && command.commands.length > 0 && named.length > 0) problems.push(`${file}: npx tracking ${words.join(' ')}: no command ${found[0]} ${named[0]}`);
        if (found.length === 0 && named.length > 0 && !rest[0]!.startsWith('-')) problems.push(`${file}: npx tracking ${words.join(' ')}: no command ${named[0]}`);
        const known = [...optionsOf(command), ...GLOBAL_OPTIONS];
        for (const flag of rest.filter((w) => /^--?[a-zA-Z]/.test(w))) {
          if (!known.includes(flag.split('=')[0]!)) problems.push(`${file}: npx tracking ${words.join(' ')}: no option ${flag} on "${found.join(' ') || '(program)'}"`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(count).toBeGreaterThan(40);
  });

  it('the CLI reference has a section for every command, naming each of its options', () => {
    const reference = read('docs/cli.md');
    const problems: string[] = [];
    for (const group of program.commands) {
      for (const command of group.commands.length > 0 ? group.commands : [group]) {
        const words = command === group ? [group.name()] : [group.name(), command.name()];
        const heading = prose(reference)
          .split('\n')
          .find((line) => line.startsWith(`### \`${words.join(' ')}`));
        if (!heading) {
          problems.push(`no "### \`${words.join(' ')}\`" section`);
          continue;
        }
        const text = section(reference, heading);
        for (const option of command.options) {
          if (option.long && option.long !== '--json' && !text.includes(`\`${option.long}`)) problems.push(`${words.join(' ')}: ${option.long} not described`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('the configuration in the docs', () => {
  it("the operations guide's table lists exactly the variables the configuration reads, once each", () => {
    const table = section(read('docs/operations.md'), '## Configuration');
    const names = [...table.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]!);
    expect(names.length).toBe(new Set(names).size);
    expect([...names].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it("every environment variable the docs name is one the configuration reads (or the tests' own)", () => {
    // Variables of the test suite (the broker choice, the property test's PROPERTY_*, the contract fuzzer's SCHEMATHESIS_*), a client build's, the benchmarks', and the examples' own shell variables.
    const elsewhere = (name: string) =>
      ['TEST_DATABASE_URL', 'TEST_KAFKA_BROKER', 'CKJS_LINKING', 'INGEST_TOKEN'].includes(name) || ['PROPERTY_', 'SCHEMATHESIS_', 'BENCH_'].some((prefix) => name.startsWith(prefix));
    const problems: string[] = [];
    for (const file of DOCS) {
      for (const match of read(file).matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`/g)) {
        const name = match[1]!;
        if (!(CONFIG_VARIABLES as readonly string[]).includes(name) && !elsewhere(name)) problems.push(`${file}: ${name}`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('the endpoints in the docs', () => {
  const ctx = {} as ServiceContext;
  const normalized = (p: string) => p.replace(/\{[^}]*\}/g, '{}');

  it('the API guide names every operation of the public API, and no other', () => {
    const guide = read('docs/api.md');
    const routes = apiRoutes(ctx).map((r) => `${r.method} ${r.path}`);
    expect(routes.filter((route) => !guide.includes(route))).toEqual([]);
    const known = new Set(apiRoutes(ctx).map((r) => `${r.method} ${normalized(r.path)}`));
    const named = [...guide.matchAll(/\b(GET|POST|PATCH|DELETE) (\/(?:assets|locations|reports|orgs)[A-Za-z0-9_{}/-]*)/g)].map((m) => `${m[1]} ${normalized(m[2]!.replace(/\/$/, ''))}`);
    expect(named.filter((op) => !known.has(op))).toEqual([]);
  });

  it('the scan-ingestion guide names the handheld operation', () => {
    const guide = read('docs/scan-ingestion.md');
    for (const route of handheldRoutes(ctx, ingestMetrics)) expect(guide).toContain(`${route.method} /ingest/v1${route.path}`);
  });

  it('every metric the docs name is registered', async () => {
    // The lag gauges live in a registry per service context; a scrape without a database leaves their values out, not their names.
    const lag = projectionLagRegistry({ log: { warn: () => undefined } } as unknown as Pick<ServiceContext, 'store' | 'pool' | 'log'>, []);
    const registered = new Set([...(await metricsRegistry.getMetricsAsJSON()), ...(await lag.getMetricsAsJSON())].map((m) => m.name));
    // The database roles of the database `tracking` share the prefix.
    const dbRoles = Object.values(databaseRoleNames('tracking'));
    const problems: string[] = [];
    for (const file of DOCS) {
      for (const match of read(file).matchAll(/`(tracking_[a-z_]+)(?:\{[^}]*\})?`/g)) {
        if (!registered.has(match[1]!) && !dbRoles.includes(match[1]!)) problems.push(`${file}: ${match[1]}`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('links in the docs', () => {
  it('every relative link resolves to a file, and every anchor to a heading', () => {
    const problems: string[] = [];
    let count = 0;
    for (const file of DOCS) {
      const text = read(file);
      for (const match of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1]!;
        if (/^[a-z]+:/i.test(target)) continue;
        count++;
        const [filePart, anchor] = target.split('#') as [string, string | undefined];
        const resolved = filePart === '' ? path.join(ROOT, file) : path.resolve(path.dirname(path.join(ROOT, file)), filePart);
        if (!fs.existsSync(resolved)) {
          problems.push(`${file}: ${target}: no such file`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !anchors(fs.readFileSync(resolved, 'utf8')).has(anchor)) {
          problems.push(`${file}: ${target}: no such heading`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(count).toBeGreaterThan(30);
  });
});

describe('the code the docs name', () => {
  /** Every file of the repository, as paths from its root. */
  function repositoryFiles(dir = ROOT, prefix = ''): string[] {
    return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      if (['node_modules', '.git', '.data', '.cache', 'test-results', 'reports', '.stryker-tmp'].includes(entry.name)) return [];
      const relative = prefix + entry.name;
      return entry.isDirectory() ? [`${relative}/`, ...repositoryFiles(path.join(dir, entry.name), `${relative}/`)] : [relative];
    });
  }

  it('every source file or folder the docs name in backticks exists (the design page\'s map included)', () => {
    const files = repositoryFiles();
    const exists = (name: string) => files.some((f) => f === name || f.endsWith(`/${name}`));
    const problems: string[] = [];
    let count = 0;
    for (const file of DOCS.filter((f) => f !== 'CHANGELOG.md')) {
      for (const match of prose(read(file)).matchAll(/`([A-Za-z0-9_.\-/]+?(?:\.(?:ts|mjs|sql|java|xml|yml|yaml)|\/))`/g)) {
        const name = match[1]!.replace(/^\.\//, '');
        // URL paths, and folders the service, the tests and the tools make at run time.
        if (name.includes('<') || name.startsWith('/') || /^(\.data|\.cache|test-results|reports|pg)\//.test(name)) continue;
        count++;
        if (!exists(name)) problems.push(`${file}: ${name}`);
      }
    }
    expect(problems).toEqual([]);
    expect(count).toBeGreaterThan(50);
  });
});
