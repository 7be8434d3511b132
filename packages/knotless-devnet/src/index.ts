export { startNetwork, NetworkError, type Network, type NetworkOptions, type Account } from './network.ts';
export { freePort } from './ports.ts';
