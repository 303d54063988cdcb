export {
  canonicalPng,
  ensureFont,
  font,
  pngChunks,
  pngSize,
  renderPng,
  FONT_FAMILY,
  FONT_PACKAGE,
  type RenderedPng,
} from './png.js';
export { drawRegion, MASKED, REGION_RENDERERS, type Rect, type RegionRenderer, type RegionStyle } from './regions.js';
export { ImageStore, imagePath } from './store.js';
