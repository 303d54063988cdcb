export { pinPlanRevisions, resolveRevision, isHubId, HubNotFound, type HubOptions } from './revisions.js';
