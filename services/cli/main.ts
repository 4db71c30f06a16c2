import { reportError, runCli } from './cli.js';

// `npx tracking ...` (bin/tracking.js) and `npm run cli -- ...` run this. The exit waits for
// stdout and stderr to flush: on a pipe a write may be asynchronous, and a JSON document must
// arrive whole.
const exit = (code: number) => process.stderr.write('', () => process.stdout.write('', () => process.exit(code)));

// `npx tracking --help | head` closes the pipe early: that is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

runCli(process.argv.slice(2)).then(exit, (error: unknown) => exit(reportError(error)));
