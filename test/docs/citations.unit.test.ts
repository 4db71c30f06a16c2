import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Code cites the project's own guides by heading (issue 32): a comment, a test's name or a message
 * names a file of docs/ and, in double quotes, one or more of its headings, as in
 * `docs/<file>.md "<Heading>"`, `docs/<file>.md, "<Heading>"`, `docs/<file>.md ("<Heading>")` or
 * `docs/<file>.md "<Heading>", "<Other>" and "<Third>"`; or, unquoted, the whole parenthesis
 * `(docs/<file>.md, <Heading>)` or `(docs/<file>.md: <Heading>)`. A citation may run over the
 * lines of a comment. The file must exist and each heading must be one of its `#` lines, compared
 * as text (inline code marks dropped, spaces collapsed).
 *
 * Nothing cites the design notes and the contract text kept outside the repository: their names
 * (OUTSIDE below) are refused wherever they appear, since a reader of the repository cannot follow
 * them. This file names them to refuse them, so that check skips it.
 *
 * TypeScript and JavaScript files are read through the compiler, their comments and string
 * literals only (code such as a parameter named `spec` is not prose); every other text file
 * (markdown, SQL, Python, YAML, shell) whole.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const SELF = path.relative(ROOT, import.meta.filename);
const SKIPPED_DIRS = new Set(['node_modules', '.git', '.data', '.cache', 'test-results', 'reports', 'coverage', '.stryker-tmp', 'dist']);
const SCRIPT = /\.(?:ts|tsx|mts|cts|js|mjs|cjs)$/;
const TEXT = /\.(?:md|sql|py|ya?ml|conf|sh|html|java|xml|txt)$|^\.env\.example$|^Dockerfile/;

/** Every file to read, as paths from the repository's root. */
function sourceFiles(dir = ROOT, prefix = ''): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : sourceFiles(path.join(dir, entry.name), `${prefix}${entry.name}/`);
    return SCRIPT.test(entry.name) || TEXT.test(entry.name) ? [`${prefix}${entry.name}`] : [];
  });
}

/** A heading or a citation's heading as text: no inline code marks, single spaces. */
const asText = (heading: string) => heading.replace(/`/g, '').replace(/\s+/g, ' ').trim();

/** The headings of a markdown text, outside its fenced code blocks. */
function headingsOf(markdown: string): Set<string> {
  const prose = markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
  return new Set([...prose.matchAll(/^#{1,6} +(.+?) *#*$/gm)].map((m) => asText(m[1]!)));
}

/**
 * The text of a script where citations can be: its comments and the contents of its string and
 * template literals, at their own offsets; everything else blanked (line breaks kept).
 */
function proseOfScript(text: string, fileName: string): string {
  const kind = fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : /\.[mc]?js$/.test(fileName) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const keep: Array<[number, number]> = [];
  // A comment is the leading trivia of the token after it, which starts where a node or a list
  // of nodes starts or ends.
  const commentsAt = (position: number) => {
    for (const range of ts.getLeadingCommentRanges(text, position) ?? []) keep.push([range.pos, range.end]);
  };
  const visit = (node: ts.Node): void => {
    commentsAt(node.pos);
    commentsAt(node.end);
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateLiteralToken(node) || ts.isJsxText(node)) keep.push([node.getStart(source), node.end]);
    ts.forEachChild(node, visit, (nodes) => {
      commentsAt(nodes.pos);
      commentsAt(nodes.end);
      nodes.forEach(visit);
    });
  };
  visit(source);
  const chars = text.replace(/[^\n]/g, ' ').split('');
  for (const [start, end] of keep) for (let i = start; i < end; i++) chars[i] = text[i]!;
  return chars.join('');
}

/**
 * The lines of a text joined into one, each continuation's comment mark (`*`, `//`, `#`, `--`)
 * and indentation replaced by one space, with the line each character came from.
 */
function joinLines(text: string): { text: string; lineAt: (index: number) => number } {
  let joined = '';
  const lines: number[] = [];
  text.split('\n').forEach((line, i) => {
    const body = i === 0 ? line : ` ${line.replace(/^[ \t]*(?:\/\/+|\*(?!\/)|#+|--)?[ \t]*/, '')}`;
    joined += body;
    for (let k = 0; k < body.length; k++) lines.push(i + 1);
  });
  return { text: joined, lineAt: (index) => lines[index] ?? lines.length };
}

interface Citation {
  /** The cited file, from the repository's root. */
  file: string;
  /** The cited headings, as written. */
  headings: string[];
  /** Where the file name and each heading start, in the joined text. */
  at: number;
  headingsAt: number[];
}

/** The citations of a joined text. */
function citationsIn(text: string): Citation[] {
  const found: Citation[] = [];
  for (const match of text.matchAll(/(?<![\w./-])docs\/([\w.-]+(?:\/[\w.-]+)*\.md)\b/g)) {
    const start = match.index;
    const end = start + match[0].length;
    const citation: Citation = { file: `docs/${match[1]}`, headings: [], at: start, headingsAt: [] };
    found.push(citation);
    // Unquoted: the whole parenthesis after the file's name is the heading.
    const bare = text[start - 1] === '(' ? /^[,:] +([^"()]+?)\)/.exec(text.slice(end)) : null;
    if (bare) {
      citation.headings.push(bare[1]!);
      citation.headingsAt.push(end + bare[0].indexOf(bare[1]!));
      continue;
    }
    // Quoted: the first after a space, a comma, a colon or a parenthesis, then a list of them.
    let rest = end;
    let next = /^\s*[,:]?\s*\(?\s*"([^"\s,][^"]*)"/.exec(text.slice(rest));
    while (next) {
      citation.headings.push(next[1]!);
      citation.headingsAt.push(rest + next[0].lastIndexOf(`"${next[1]}"`) + 1);
      rest += next[0].length;
      next = /^\s*(?:,\s*and|,|and|or|\/|\+)\s*"([^"\s,][^"]*)"/.exec(text.slice(rest));
    }
  }
  return found;
}

/** The names of documents outside the repository ("the spec" is one of them), and headings of them. */
const OUTSIDE = [
  { pattern: /\b(?:DECISIONS|INTERFACES|ARCHITECTURE)(?:\.md)?\b|\bSTYLE\.md\b/g, what: 'a design note outside the repository' },
  { pattern: /\bapi-v1(?:\.md)?\b/g, what: 'the contract text outside the repository' },
  { pattern: /(?<![\w-])spec(?:\s+"|\s+table\b)|\(spec\b|"spec"|\bthe spec\b/gi, what: 'the contract text outside the repository ("spec")' },
  // Headings of that text that code used to cite, none of them a heading of docs/.
  { pattern: /"(?:Limits|Location \(view\)|Asset \(view\))"|\bAccept-if-matches\b|\brule 9\b/g, what: 'a heading of the contract text outside the repository' },
];

/** Whatever a citation or a name of OUTSIDE starts with, to skip a file without either. */
const MENTIONS = /docs\/|DECISIONS|INTERFACES|ARCHITECTURE|STYLE|api-v1|spec|"(?:Limits|Location|Asset)|Accept-if-matches|rule 9/i;

describe('citations of the docs', () => {
  const docs = new Map<string, Set<string>>(
    fs
      .readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => [`docs/${f}`, headingsOf(fs.readFileSync(path.join(ROOT, 'docs', f), 'utf8'))] as [string, Set<string>]),
  );

  it('reads every form the code uses', () => {
    const sample = [
      '// (D/api.md "Time range", D/scan-ingestion.md) and D/api.md, "Errors" and',
      '// D/cli.md ("keys list") and D/api.md "Assets", "Locations" and "Tags"; D/web-app.md "Session',
      ' * tokens"; (D/api.md: Changing a record: PATCH); (D/cli.md, orgs create); D/design.md\'s table; ["D/x.md", "y"]',
    ]
      .join('\n')
      .replaceAll('D/', 'docs/');
    const joined = joinLines(sample);
    const cited = citationsIn(joined.text).map((c) => ({ file: c.file.replace('docs/', 'D/'), headings: c.headings, line: joined.lineAt(c.headingsAt[0] ?? c.at) }));
    expect(cited).toEqual([
      { file: 'D/api.md', headings: ['Time range'], line: 1 },
      { file: 'D/scan-ingestion.md', headings: [], line: 1 },
      { file: 'D/api.md', headings: ['Errors'], line: 1 },
      { file: 'D/cli.md', headings: ['keys list'], line: 2 },
      { file: 'D/api.md', headings: ['Assets', 'Locations', 'Tags'], line: 2 },
      { file: 'D/web-app.md', headings: ['Session tokens'], line: 2 },
      { file: 'D/api.md', headings: ['Changing a record: PATCH'], line: 3 },
      { file: 'D/cli.md', headings: ['orgs create'], line: 3 },
      { file: 'D/design.md', headings: [], line: 3 },
      { file: 'D/x.md', headings: [], line: 3 },
    ]);
    // In a script, only comments and strings: a parameter named after a document is code.
    const script = 'function f(spec: Spec) { return spec; }\n// as the spec says\nconst s = \'see spec "Limits"\';\n';
    expect([...proseOfScript(script, 'x.ts').matchAll(OUTSIDE[2]!.pattern)].map((m) => m[0])).toEqual(['the spec', 'spec "']);
  });

  it('every cited file of docs/ exists and has every heading cited; nothing names a document outside the repository', () => {
    const problems: string[] = [];
    let citations = 0;
    let headings = 0;
    for (const file of sourceFiles()) {
      const raw = fs.readFileSync(path.join(ROOT, file), 'utf8');
      // Parsing is the slow part: a file with nothing either check could find is skipped.
      if (!MENTIONS.test(raw)) continue;
      const { text, lineAt } = joinLines(SCRIPT.test(file) ? proseOfScript(raw, file) : raw);
      for (const citation of citationsIn(text)) {
        citations++;
        const known = docs.get(citation.file);
        if (!known) {
          problems.push(`${file}:${lineAt(citation.at)}: ${citation.file}: no such file`);
          continue;
        }
        citation.headings.forEach((heading, i) => {
          headings++;
          if (!known.has(asText(heading))) problems.push(`${file}:${lineAt(citation.headingsAt[i]!)}: ${citation.file} has no heading "${asText(heading)}"`);
        });
      }
      for (const { pattern, what } of file === SELF ? [] : OUTSIDE) {
        for (const match of text.matchAll(pattern)) problems.push(`${file}:${lineAt(match.index)}: "${match[0].trim()}" names ${what}; cite docs/ instead`);
      }
    }
    expect(problems).toEqual([]);
    expect(citations).toBeGreaterThan(400);
    expect(headings).toBeGreaterThan(350);
  });
});
