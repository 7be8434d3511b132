export { Context } from './context.ts';
export { readConfig, type Config } from './config/env.ts';
export { KnotlessError, isKnotlessError, type ErrorCode } from './errors.ts';
export { login, activeSession } from './auth/login.ts';
export { IdentityResolver, type Identity } from './identity/resolver.ts';
export { RepoRecords } from './repo/records.ts';
export { checkRepoName, isValidRepoName, parseRepoSpec } from './repo/name.ts';
