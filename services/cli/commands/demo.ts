import type { CliCommand } from '../command.js';
import { seedDemo } from '../demo/seed.js';

/** `seed demo`: a small organization with locations, assets, tags, readers and scans to explore. */
export const demoCommands: CliCommand[] = [
  {
    path: ['seed', 'demo'],
    usage: 'seed demo',
    async run(ctx) {
      const seed = await seedDemo(ctx, { project: ctx.project });
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
];
