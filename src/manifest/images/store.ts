import type { ImagePart, ImageRef } from '../../contracts/index.js';
import type { RenderedPng } from './png.js';
import { IMAGES_DIR } from '../../layout.js';

/** Where an image lives beside a run's rows: content-addressed by its sha256. */
export function imagePath(sha256: string, ext: 'png' | 'jpg' = 'png'): string {
  return `${IMAGES_DIR}/${sha256}.${ext}`;
}

/**
 * The images a task rendered while planning, by sha256: rows name them by content, and the writer
 * copies those a run uses into its folder. The same drawing is stored once however often it is
 * shown.
 */
export class ImageStore {
  private readonly images = new Map<string, RenderedPng>();

  put(image: RenderedPng): ImagePart {
    if (!this.images.has(image.sha256)) this.images.set(image.sha256, image);
    return {
      type: 'image',
      path: imagePath(image.sha256, image.ext),
      sha256: image.sha256,
      width: image.width,
      height: image.height,
    };
  }

  get(sha256: string): RenderedPng {
    const image = this.images.get(sha256);
    if (!image) throw new RangeError(`image ${sha256} was never rendered in this plan`);
    return image;
  }

  ref(sha256: string): ImageRef {
    const image = this.get(sha256);
    return { path: imagePath(sha256, image.ext), sha256, bytes: image.png.length };
  }

  get size(): number {
    return this.images.size;
  }
}
