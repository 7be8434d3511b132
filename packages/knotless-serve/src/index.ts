export { startAppview, type Appview } from './appview.ts';
export { defaultConfig, type ServeConfig } from './config.ts';
export { configFrom, main } from './main.ts';
export { isPostgres, openDatabase } from './db/open.ts';
