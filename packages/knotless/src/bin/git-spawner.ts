import { serveSpawns } from 'knotless-core/git/spawner/host';

// The warm agent's git spawner (forked by the agent, never run by hand): see its module for why.
serveSpawns();
