export { startNetwork, NetworkError, type Network, type NetworkOptions, type Account } from './network.ts';
export { startDelayLink, type DelayLink, type DelayLinkOptions } from './delay.ts';
export { freePort } from './ports.ts';
export { startProxy, type Proxy, type ProxyOptions, type ProxyRequest, type RequestLog } from './proxy.ts';
export { type Fault, type FaultRule, type FiredFault } from './faults.ts';
export { makeCertificate, type Certificate } from './tls.ts';
export { startGitHttp, type GitHttpServer } from './git-http.ts';
export { registerDid } from './plc.ts';
export { startTraffic, type Traffic } from './traffic.ts';
