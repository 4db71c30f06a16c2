import type { CliCommand } from '../command.js';
import { authCommands } from './auth.js';
import { projectionCommands } from './projections.js';

export const commands: CliCommand[] = [...projectionCommands, ...authCommands];
