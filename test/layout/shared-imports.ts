import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

/**
 * The imports between the rooms of `shared/` (its folders and its top-level files), read from the
 * source: static, type-only, re-exports and dynamic `import()` alike. The layer order they must
 * follow is `sharedLayers` in eslint.config.js (docs/design.md "Where things are").
 *
 *   node --import tsx test/layout/shared-imports.ts   # the graph, and every import that runs back up
 */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Lowest first; a room may import only rooms of lower layers, never one of its own layer. */
export type Layers = ReadonlyArray<readonly string[]>;

export interface SharedImport {
  /** Both relative to the project root. */
  from: string;
  to: string;
  fromRoom: string;
  toRoom: string;
}

/** `shared/auth/tokens.ts` → `auth/`, `shared/config.ts` → `config.ts`. */
export function roomOf(file: string): string {
  const [, first, ...rest] = file.split('/');
  return rest.length > 0 ? `${first}/` : first!;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(file);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [file] : [];
  });
}

/** Every file of shared/ that is not a test. */
export function sharedFiles(): string[] {
  return sourceFiles('shared').sort();
}

/** Every import from one room of shared/ into another. */
export function sharedImports(): SharedImport[] {
  const imports: SharedImport[] = [];
  for (const from of sharedFiles()) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(path.join(ROOT, from), 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const to = path.posix.join(path.posix.dirname(from), fileName).replace(/\.js$/, '.ts');
      if (!to.startsWith('shared/')) continue;
      const fromRoom = roomOf(from);
      const toRoom = roomOf(to);
      if (fromRoom !== toRoom) imports.push({ from, to, fromRoom, toRoom });
    }
  }
  return imports;
}

export function layerOf(layers: Layers, room: string): number {
  return layers.findIndex((layer) => layer.includes(room));
}

/** The imports that run back up: into a higher layer, or into another room of the same layer. */
export function importsBackUp(imports: readonly SharedImport[], layers: Layers): SharedImport[] {
  return imports.filter((i) => layerOf(layers, i.toRoom) >= layerOf(layers, i.fromRoom));
}

/** The layer order, as eslint.config.js declares it. */
export async function declaredLayers(): Promise<Layers> {
  const config = (await import(pathToFileURL(path.join(ROOT, 'eslint.config.js')).href)) as { sharedLayers: Layers };
  return config.sharedLayers;
}

async function main(): Promise<void> {
  const layers = await declaredLayers();
  const imports = sharedImports();
  const counts = new Map<string, number>();
  for (const i of imports) counts.set(`${i.fromRoom} -> ${i.toRoom}`, (counts.get(`${i.fromRoom} -> ${i.toRoom}`) ?? 0) + 1);
  console.log(`Layers of shared/, lowest first: ${layers.map((layer) => layer.join(' ')).join('  <  ')}\n`);
  console.log('Imports between rooms:');
  for (const [edge, n] of [...counts].sort()) console.log(`  ${edge}  ${n}`);
  const unplaced = [...new Set(sharedFiles().map(roomOf))].filter((room) => layerOf(layers, room) < 0);
  if (unplaced.length > 0) console.log(`\nRooms without a layer: ${unplaced.join(', ')}`);
  const back = importsBackUp(imports, layers);
  console.log(`\nImports that run back up: ${back.length}`);
  for (const i of back) console.log(`  ${i.from} -> ${i.to}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
