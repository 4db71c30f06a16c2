import type { CommandModule } from '../registry.js';

/** `seed demo`: a small organization with locations, assets, tags, readers and scans to explore. */
export default {
  groups: { seed: 'example data to explore' },
  commands: [
    {
      path: ['seed', 'demo'],
      summary: 'a new demo organization with locations, assets, tags, readers and a few days of scans',
      description: 'Scans go through the real ingest paths (the handheld endpoint; Kafka when KAFKA_BROKERS is set). Prints the org id and ready-to-use keys. Running it again makes another demo org.',
      examples: ['npx tracking seed demo', 'npx tracking seed demo --json'],
      async run(_input, ctx) {
        const { seedDemo } = await import('../demo/seed.js');
        const seed = await seedDemo(await ctx.service(), { project: (position, streams) => ctx.project(position, streams) });
        if (ctx.out.json) {
          ctx.out.print(seed);
          return;
        }
        process.stderr.write('The tokens are shown only now: store them safely.\n');
        ctx.out.print(
          {
            org_id: seed.org_id,
            locations: seed.locations,
            assets: seed.assets,
            readers: seed.readers,
            handheld_reads: seed.scans.handheld,
            kafka_reads: seed.scans.kafka,
            api_token: seed.api_key.token,
            scans_token: seed.scans_key.token,
          },
          ['org_id', 'locations', 'assets', 'readers', 'handheld_reads', 'kafka_reads', 'api_token', 'scans_token'],
        );
      },
    },
  ],
} satisfies CommandModule;
