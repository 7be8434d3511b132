import { ISSUES } from '../../forge/kinds.ts';
import type { Command } from '../command.ts';
import { listCommand } from './forge-list.ts';

export const command: Command = listCommand(ISSUES);
