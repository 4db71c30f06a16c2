import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// issue 8: the CLI loads only what its command needs. Everything the CLI loads before it knows the
// command (its entry, the command tree, every command module) must reach no package but commander:
// no zod, pg, fastify, jose... A command's implementation comes in with `await import()` in its
// `run`, which this walk does not follow, on purpose.

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'services/cli');
const ALLOWED_PACKAGES = new Set(['commander']);

/** Specifiers of the imports that exist at run time (not `import type`, not all-type bindings). */
function runtimeImports(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const specifiers: string[] = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.isTypeOnly) continue;
      const bindings = clause?.namedBindings;
      const onlyTypes = clause && !clause.name && bindings && ts.isNamedImports(bindings) && bindings.elements.every((e) => e.isTypeOnly);
      if (onlyTypes) continue;
      specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    } else if (ts.isExportDeclaration(statement) && statement.moduleSpecifier && !statement.isTypeOnly) {
      specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return specifiers;
}

function reachable(entries: string[]): { files: Set<string>; packages: Map<string, string> } {
  const files = new Set<string>();
  const packages = new Map<string, string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const specifier of runtimeImports(file)) {
      if (specifier.startsWith('.')) {
        queue.push(path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts'));
      } else if (!specifier.startsWith('node:')) {
        packages.set(specifier, path.relative(ROOT, file));
      }
    }
  }
  return { files, packages };
}

describe('CLI start-up', () => {
  it('the entry, the command tree and the command modules load no package but commander', () => {
    const commandModules = fs
      .readdirSync(path.join(CLI, 'commands'))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
      .map((f) => path.join(CLI, 'commands', f));
    expect(commandModules.length).toBeGreaterThan(0);
    const { files, packages } = reachable([path.join(CLI, 'main.ts'), ...commandModules]);
    const refused = [...packages].filter(([name]) => !ALLOWED_PACKAGES.has(name)).map(([name, by]) => `${name} (imported by ${by})`);
    expect(refused).toEqual([]);
    // The database session and the service's wiring come only with a command that runs.
    expect([...files].map((f) => path.relative(ROOT, f))).not.toContain('services/cli/session.ts');
  });

  it('opening the service context loads no HTTP code', () => {
    const { packages } = reachable([path.join(ROOT, 'services/open-context.ts'), path.join(CLI, 'session.ts')]);
    expect([...packages.keys()].filter((name) => /fastify|light-my-request|yaml|prom-client/.test(name))).toEqual([]);
    expect([...packages.keys()]).toContain('pg');
  });
});
