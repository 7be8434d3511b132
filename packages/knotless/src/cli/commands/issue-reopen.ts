import { ISSUES } from '../../forge/kinds.ts';
import type { Command } from '../command.ts';
import { stateCommand } from '../forge-shared.ts';

export const command: Command = stateCommand(ISSUES, 'reopen');
