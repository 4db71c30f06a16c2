import type { CliCommand } from '../command.js';
import { authCommands } from './auth.js';
import { demoCommands } from './demo.js';
import { projectionCommands } from './projections.js';
import { readerCommands } from './readers.js';
import { scanCommands } from './scans.js';

export const commands: CliCommand[] = [...projectionCommands, ...authCommands, ...readerCommands, ...scanCommands, ...demoCommands];
