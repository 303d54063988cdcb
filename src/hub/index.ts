export { pinPlanRevisions, pinModel, hubModelsOf, isHubId, fetchCommand, type ModelPin, type PinOptions } from './revisions.js';
export { fetchSnapshot, type FetchOptions, type FetchProgress, type FetchedSnapshot } from './download.js';
export { hubClient, remoteCommit, HubError, type HubOptions, type HubFailure } from './client.js';
export { HubCache, COMMIT_SHA } from './cache.js';
export { hubCacheDir, hubEndpoint, hubToken, hubOffline, hfHome, type HubToken } from './env.js';
