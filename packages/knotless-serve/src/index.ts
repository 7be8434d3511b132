export { startAppview, type Appview } from './appview.ts';
export { defaultConfig, type ServeConfig } from './config.ts';
export { configFrom } from './main.ts';
export { isPostgres, openDatabase } from './db/open.ts';
