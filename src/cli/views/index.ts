/** Terminal views of the queue's read models: pure text of a status or fleet snapshot, and the live redraw. */
export {
  auditHeadline,
  formatDuration,
  progressBar,
  renderBars,
  renderChanges,
  renderPlain,
  runDetail,
} from './status-format.js';
export { renderFleet } from './fleet-format.js';
export { LiveView } from './live-view.js';
