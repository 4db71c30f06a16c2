import type { CommandModule } from '../registry.js';

/**
 * Migrations on their own. Every start of the service and every command applies pending ones
 * first (under an advisory lock); this command does only that, for where one step alone holds the
 * migration role (MIGRATION_DATABASE_URL): a Kubernetes init container, a release job.
 */
export default {
  commands: [
    {
      path: ['migrate'],
      summary: 'apply pending database migrations and grants, then exit',
      description:
        'Migrates through MIGRATION_DATABASE_URL (DATABASE_URL when unset) under a lock, so several at once are safe; prints the migrations recorded in each schema. Processes without MIGRATION_DATABASE_URL then start on the current schema.',
      examples: ['npx tracking migrate', 'npx tracking migrate --json'],
      async run(_input, ctx) {
        const pool = await ctx.pool();
        const { rows } = await pool.query<{ schema: string; migrations: number }>(
          `SELECT 'event_store' AS schema, count(*)::int AS migrations FROM event_store.schema_migrations
           UNION ALL SELECT 'service', count(*)::int FROM service.schema_migrations
           UNION ALL SELECT 'read_model', count(*)::int FROM read_model.schema_migrations`,
        );
        ctx.out.print(rows, ['schema', 'migrations']);
      },
    },
  ],
} satisfies CommandModule;
