export { pinModel, pinRepo, isHubId, fetchCommand, type ModelPin, type RepoPin, type PinOptions } from './revisions.js';
export {
  fetchSnapshot,
  RemoteSnapshot,
  type FetchOptions,
  type FetchProgress,
  type FetchedSnapshot,
} from './download.js';
export { hubClient, remoteCommit, HubError, type HubClient, type HubOptions, type HubFailure } from './client.js';
export { HubCache, COMMIT_SHA, type RepoType } from './cache.js';
export { hubCacheDir, hubEndpoint, hubToken, hubOffline, hfHome, type HubToken } from './env.js';
