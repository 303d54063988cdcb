/** The web dashboard: one Redis poller per server, server-sent events to every open page. */
export {
  auditView,
  diskAuditView,
  hostViews,
  phaseLabel,
  runView,
  StatusSource,
  type AuditView,
  type HostView,
  type RunView,
  type Snapshot,
} from './source.js';
export {
  allowedHostNames,
  createDashboardApp,
  startDashboard,
  type Dashboard,
  type DashboardOptions,
} from './server.js';
