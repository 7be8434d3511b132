import { PULLS } from '../../forge/kinds.ts';
import type { Command } from '../command.ts';
import { commentCommand } from '../forge-shared.ts';

export const command: Command = commentCommand(PULLS);
