import tseslint from 'typescript-eslint';

/**
 * Imports run one way: services → projections → shared. `shared/` (infrastructure and the
 * domain) imports nothing above it; `projections/` (read models) imports `shared/` and other read
 * models; `services/` (role wiring) imports both. Tests and benchmarks may import anything.
 */
const layer = (forbidden, message) => ({
  'no-restricted-imports': ['error', { patterns: [{ group: forbidden.flatMap((dir) => [`**/${dir}/**`, `${dir}/**`]), message }] }],
});

export const sharedLayers = [
  ['errors.ts', 'json/', 'random.ts', 'redaction.ts', 'time.ts'],
  ['logger.ts'],
  ['db/'],
  ['event-store/', 'auth/'],
  ['projection/'],
  ['domain/'],
  ['http/'],
  ['config.ts'],
  ['context.ts'],
];

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', '.cache/**', 'coverage/**', 'test-results/**', '.stryker-tmp/**', 'reports/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['shared/**/*.ts'],
    ignores: ['shared/**/*.test.ts'],
    rules: layer(['services', 'projections', 'test'], 'shared/ imports nothing outside shared/ (services → projections → shared).'),
  },
  {
    files: ['projections/**/*.ts'],
    ignores: ['projections/**/*.test.ts'],
    rules: layer(['services', 'test'], 'projections/ imports only shared/ and other read models (services → projections → shared).'),
  },
);
