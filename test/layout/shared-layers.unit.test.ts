import fs from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { ROOT, declaredLayers, importsBackUp, layerOf, roomOf, sharedFiles, sharedImports } from './shared-imports.js';

const layers = await declaredLayers();
const rooms = layers.flat();
const eslint = new ESLint({ cwd: ROOT });

/** A file of `from`, and the specifier by which it imports something of `to`. */
function probe(from: string, to: string): { file: string; specifier: string } {
  const file = from.endsWith('/') ? `shared/${from}probe.ts` : `shared/${from}`;
  const target = to.endsWith('/') ? `shared/${to}probe.js` : `shared/${to.replace(/\.ts$/, '.js')}`;
  const specifier = path.posix.relative(path.posix.dirname(file), target);
  return { file, specifier: specifier.startsWith('.') ? specifier : `./${specifier}` };
}

async function refusals(file: string, specifier: string): Promise<number> {
  const code = `import { probe } from '${specifier}';\nexport const x = probe;\n`;
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').length;
}

describe('the layers of shared/ (eslint.config.js sharedLayers)', () => {
  it('place every room of shared/ in exactly one layer', () => {
    const present = [...new Set(sharedFiles().map(roomOf))].sort();
    expect([...rooms].sort()).toEqual(present);
    expect(new Set(rooms).size).toBe(rooms.length);
  });

  it("docs/design.md's table of layers is sharedLayers, layer by layer", () => {
    const design = fs.readFileSync(path.join(ROOT, 'docs/design.md'), 'utf8');
    const table = [...design.matchAll(/^\| (\d+) \| ([^|]+) \|/gm)].map((row) => [...row[2]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
    expect(table).toEqual(layers);
  });

  it('no import of shared/ runs back up: into its own layer or a higher one (static, type-only, re-exports and dynamic)', () => {
    expect(importsBackUp(sharedImports(), layers).map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
  });

  it('the lint rule refuses, from every room, an import of each room of its own layer or above, and allows one of each room below', async () => {
    const wrong: string[] = [];
    for (const from of rooms) {
      // One probe file per room, one import per line, each of another room.
      const targets = rooms.filter((to) => to !== from);
      const probes = targets.map((to) => probe(from, to));
      const code = probes.map(({ specifier }, i) => `export * as probe${i} from '${specifier}';`).join('\n');
      const [result] = await eslint.lintText(`${code}\n`, { filePath: path.join(ROOT, probes[0]!.file) });
      const refusedLines = new Set(result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.line));
      targets.forEach((to, i) => {
        const refused = refusedLines.has(i + 1);
        if (refused !== layerOf(layers, to) >= layerOf(layers, from)) wrong.push(`${probes[i]!.file} importing ${probes[i]!.specifier}: ${refused ? 'refused' : 'allowed'}`);
      });
    }
    expect(wrong).toEqual([]);
  });

  it('refuses the imports that ran back up before the layers', async () => {
    for (const [file, specifier] of [
      ['shared/auth/authenticator.ts', '../domain/orgs-and-keys/events.js'],
      ['shared/auth/authenticator.ts', '../service-context.js'],
      ['shared/auth/index.ts', '../http/principal.js'],
      ['shared/auth/signing-keys.ts', '../config.js'],
      ['shared/domain/command.ts', '../service-context.js'],
      ['shared/domain/assets/commands.ts', '../../service-context.js'],
      ['shared/db/json-sql.ts', '../http/json-text.js'],
      ['shared/db/connections.ts', '../config.js'],
      ['shared/config.ts', './service-context.js'],
    ] as const) {
      expect(await refusals(file, specifier), `${file} importing ${specifier}`).toBe(1);
    }
  });
});
