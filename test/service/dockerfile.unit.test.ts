import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// issue 15: the image runs node itself as the service, behind an init, with a healthcheck, as a
// user other than root; the build context carries no host node_modules or data. (No docker here:
// the Dockerfile's text is what is checked.)

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function instructions(text: string): Array<{ keyword: string; args: string }> {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(' ') };
    });
}

/** The exec form (a JSON array), which runs without a shell in between. */
function execForm(args: string): string[] {
  const parsed = JSON.parse(args) as unknown;
  expect(Array.isArray(parsed), `not the exec form: ${args}`).toBe(true);
  return parsed as string[];
}

describe('deploy/Dockerfile', () => {
  const steps = instructions(fs.readFileSync(path.join(ROOT, 'deploy/Dockerfile'), 'utf8'));
  const last = (keyword: string) => steps.filter((s) => s.keyword === keyword).at(-1);

  it('starts node directly (not npm, npx or tsx) as the child of an init', () => {
    const entrypoint = execForm(last('ENTRYPOINT')!.args);
    const cmd = execForm(last('CMD')!.args);
    expect(entrypoint[0]).toMatch(/(^|\/)tini$/);
    expect(cmd).toEqual(['node', '--import', 'tsx', 'services/main.ts']);
    // What the init starts: tini's arguments end with `--`, then the command.
    const program = [...entrypoint.slice(1).filter((w) => w !== '--'), ...cmd][0]!;
    expect(path.basename(program)).toBe('node');
    for (const word of [...entrypoint, program]) expect(['npm', 'npx', 'tsx']).not.toContain(path.basename(word));
    expect(steps.some((s) => s.keyword === 'RUN' && /apt-get install .*\btini\b/.test(s.args))).toBe(true);
  });

  it('checks health on the ops listener, and runs as a user other than root', () => {
    expect(last('HEALTHCHECK')?.args).toMatch(/\/healthz/);
    expect(last('HEALTHCHECK')?.args).toMatch(/OPS_PORT/);
    expect(last('USER')?.args).toBeDefined();
    expect(['root', '0']).not.toContain(last('USER')!.args);
  });
});

describe('.dockerignore', () => {
  it('keeps host dependencies, data and git out of the build context', () => {
    const patterns = fs
      .readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const required of ['node_modules', '.data', '.git']) expect(patterns).toContain(required);
  });
});
