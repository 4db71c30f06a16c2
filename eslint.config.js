import tseslint from 'typescript-eslint';

/**
 * Imports run one way: services → projections → shared. `shared/` (infrastructure and the
 * domain) imports nothing above it; `projections/` (read models) imports `shared/` and other read
 * models; `services/` (role wiring) imports both. Tests and benchmarks may import anything.
 */
const outside = (dirs, message) => ({ group: dirs.flatMap((dir) => [`**/${dir}/**`, `${dir}/**`]), message });
const layer = (forbidden, message) => ({ 'no-restricted-imports': ['error', { patterns: [outside(forbidden, message)] }] });
const SHARED_MESSAGE = 'shared/ imports nothing outside shared/ (services → projections → shared).';

/**
 * Inside `shared/` the rooms (its folders and top-level files) stand in layers, lowest first: a
 * room imports only rooms of lower layers, never one of its own layer or above, so no two rooms
 * import each other (docs/design.md, "Where things are"). Each layer is where it is because a
 * room above really needs it. `test/layout/shared-imports.ts` lists the imports between rooms.
 */
export const sharedLayers = [
  // Leaves: the error envelope and what a failure says of itself, JSON decoding and JSON text,
  // seeded randomness, the registry of secrets to mask, waiting and trying again, the one module
  // that parses time, the one source of ULIDs.
  ['errors.ts', 'json/', 'random.ts', 'redaction.ts', 'retry.ts', 'time.ts', 'ulid.ts'],
  // The logger masks the registered secrets.
  ['logger.ts'],
  // Postgres: pools, the LISTEN client, migrations, prepared statements, SQL fragments.
  ['db/'],
  // The event store (its Postgres adapter is built on db/) and auth (signing keys in Postgres, the
  // authenticator on db/'s listener); neither needs the other.
  ['event-store/', 'auth/'],
  // The scan archive: segment files of events moved out of the Postgres log, and the log read
  // whole again (archive and the store's events) for rebuilds and replays.
  ['archive/'],
  // The projections' checkpoints and set-aside streams, in the event store's positions.
  ['projection/'],
  // The domain: its events go to the event store, its commands wait for the projections, orgs
  // and keys mint tokens with auth/.
  ['domain/'],
  // The column layout of an exported list and the formula rule, from the domain's view schemas;
  // the export (http/) and the import read it.
  ['export/'],
  // The HTTP pipeline: routes, validation, the error plugin, authenticated by auth/'s principal.
  // Nothing below it knows HTTP.
  ['http/'],
  // The environment, validated once (the key-encryption keys with auth/); the rooms below are
  // handed the few variables they read.
  ['config.ts'],
  // The service context: everything a role wires together.
  ['service-context.ts'],
];

const roomFiles = (room) => (room.endsWith('/') ? `shared/${room}**/*.ts` : `shared/${room}`);
const roomImports = (room) => (room.endsWith('/') ? [`**/${room}**`] : [`**/${room.replace(/\.ts$/, '.js')}`]);
const sharedRoomRules = sharedLayers.flatMap((layerRooms, rank) =>
  layerRooms.map((room) => {
    const above = sharedLayers.slice(rank).flat().filter((other) => other !== room);
    const below = sharedLayers.slice(0, rank).map((rooms) => rooms.join(' ')).join(' < ') || 'nothing';
    const patterns = [outside(['services', 'projections', 'test'], SHARED_MESSAGE)];
    if (above.length > 0) {
      patterns.push({
        group: above.flatMap(roomImports),
        message: `shared/${room} imports only the layers of shared/ below its own: ${below} (eslint.config.js sharedLayers, docs/design.md "Where things are").`,
      });
    }
    return { files: [roomFiles(room)], ignores: ['shared/**/*.test.ts'], rules: { 'no-restricted-imports': ['error', { patterns }] } };
  }),
);

export default tseslint.config(
  { ignores: ['node_modules/**', 'services/api/console/web/dist/**', '.data/**', '.cache/**', 'coverage/**', 'test-results/**', '.stryker-tmp/**', 'reports/**'] },
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
    rules: layer(['services', 'projections', 'test'], SHARED_MESSAGE),
  },
  ...sharedRoomRules,
  {
    // The console's browser code reaches the service over HTTP only.
    files: ['services/api/console/web/src/**/*.{ts,tsx}'],
    rules: layer(['services', 'projections', 'shared', 'test'], "the console's web/src/ is browser code: it imports only its own web/src/ and talks to the service over HTTP."),
  },
  {
    files: ['projections/**/*.ts'],
    ignores: ['projections/**/*.test.ts'],
    rules: layer(['services', 'test'], 'projections/ imports only shared/ and other read models (services → projections → shared).'),
  },
);
