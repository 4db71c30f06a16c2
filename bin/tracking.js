#!/usr/bin/env node
// `npx tracking <command>`: the administration CLI (services/cli). It is TypeScript, loaded through
// tsx's loader in this very process, so stdin, stdout, signals and the exit code are the CLI's
// own: no wrapper process in between, and nothing on stdout but the command's output.
import { register } from 'tsx/esm/api';

register();
await import('../services/cli/main.ts');
