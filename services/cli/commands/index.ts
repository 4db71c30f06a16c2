import type { CliCommand } from '../command.js';
import { projectionCommands } from './projections.js';

export const commands: CliCommand[] = [...projectionCommands];
