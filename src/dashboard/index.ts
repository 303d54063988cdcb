/** The web dashboard: one Redis poller per server, server-sent events to every open page. */
export * from './source.js';
export * from './server.js';
