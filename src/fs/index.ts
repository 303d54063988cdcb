export { writeFileAtomic, writeJsonAtomic } from './atomic.js';
