import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const eslint = new ESLint({ cwd: ROOT });

/** Lints `code` as if it were the file at `file` (relative to the project root). */
async function boundaryErrors(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('the import-boundary lint rule (services → projections → shared)', () => {
  it.each([
    ['shared/domain/assets/x.ts', "import { allProjections } from '../../../projections/index.js';\nexport const x = allProjections;\n"],
    ['shared/auth/x.ts', "import { startService } from '../../services/service.js';\nexport const x = startService;\n"],
    ['shared/x.ts', "import { startTestService } from '../test/support/service.js';\nexport const x = startTestService;\n"],
    ['projections/assets/x.ts', "import { apiRoutes } from '../../services/api/routes.js';\nexport const x = apiRoutes;\n"],
  ])('refuses an import that runs upward from %s', async (file, code) => {
    expect(await boundaryErrors(file, code)).toHaveLength(1);
  });

  it.each([
    ['shared/domain/assets/x.ts', "import { ConflictError } from '../../errors.js';\nexport const x = ConflictError;\n"],
    ['shared/service-context.ts', "import type { Projection } from './projection/projection.js';\nexport type X = Projection;\n"],
    ['projections/assets/x.ts', "import { embeddedTagsSql } from '../tags/queries.js';\nimport { prepared } from '../../shared/db/prepared.js';\nexport const x = [embeddedTagsSql, prepared];\n"],
    ['services/api/x.ts', "import { allProjections } from '../../projections/index.js';\nimport { ConflictError } from '../../shared/errors.js';\nexport const x = [allProjections, ConflictError];\n"],
  ])('allows an import that runs downward or sideways from %s', async (file, code) => {
    expect(await boundaryErrors(file, code)).toEqual([]);
  });
});
