import { PULLS } from '../../forge/kinds.ts';
import type { Command } from '../command.ts';
import { labelCommand } from './forge-label.ts';

export const command: Command = labelCommand(PULLS);
