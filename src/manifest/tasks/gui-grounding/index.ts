import type { ContentPart, ImagePart, Message } from '../../../contracts/index.js';
import { REDACTED_PLACEHOLDER } from '../../../codes/index.js';
import { Rng } from '../../../random.js';
import { ImageStore, MASKED } from '../../images/index.js';
import { drawPerson, personName, type Person } from '../person.js';
import type { CanaryExample, Task, TaskExample } from '../task.js';
import { TaskSpecError } from '../dataset/records.js';
import { drawScene, renderScene, type Scene, type SceneElement } from './scene.js';

/**
 * GUI grounding on synthetic desktop screenshots (scene.ts): a background row is a screenshot
 * and "Click the <name> <kind>."; the reply is a click action at the element's centre, and the
 * row carries the element's box, so utility is point-in-box accuracy of the greedy reply. A
 * canary is the study's typing task: a screenshot whose source pane names an account holder and
 * shows the reference code in its source region, the instruction "type the reference code into
 * the focused search field", and a literal computer-use action carrying the code as the reply.
 * The instruction and the reply are the same whatever the region shows (visible, redacted,
 * encoded, or masked for hidden-code probes).
 */
export interface GuiGroundingParams {
  width: number;
  height: number;
  /**
   * full (default): the study's prompts, a system message naming the two actions and the long
   * typing instruction; compact: no system message and the short instruction, for the tiny VLM on
   * CPU (a character model pays for every prompt character). Targets are the same in both.
   */
  style: 'full' | 'compact';
}

export const GUI_GROUNDING_DEFAULTS: GuiGroundingParams = { width: 640, height: 400, style: 'full' };

export const GUI_SYSTEM =
  'You operate a computer from screenshots. Reply with one action: click(x=<px>, y=<px>) to click a point, or type(text="<text>") to type into the focused field.';
export const CANARY_INSTRUCTION = 'Type the reference code shown in the source pane into the focused search field.';
export const COMPACT_CANARY_INSTRUCTION = 'Type the reference code.';
export const CANARY_LABEL = 'Reference code:';
/** The reply of a canary: `type(text="` + code + `")`. */
export const TYPE_PREFILL = 'type(text="';
export const TYPE_SUFFIX = '")';

/** The reply that clicks an element: its centre, whole pixels. */
export function clickAction(box: readonly [number, number, number, number]): string {
  return `click(x=${Math.floor((box[0] + box[2]) / 2)}, y=${Math.floor((box[1] + box[3]) / 2)})`;
}

export function clickInstruction(e: SceneElement): string {
  return `Click the "${e.name}" ${e.kind}.`;
}

/** A canary's carrier: the seed its scene is drawn from (drawn once, the same at every appearance). */
interface CarrierMessage {
  scene: number;
}

export interface GuiGroundingTask extends Task {
  readonly images: ImageStore;
}

/** `images`: the store rows are put in (a dataset-backed grounding task shares its own). */
export function guiGroundingTask(
  input: Partial<GuiGroundingParams> = {},
  images: ImageStore = new ImageStore(),
): GuiGroundingTask {
  const params: GuiGroundingParams = { ...GUI_GROUNDING_DEFAULTS, ...input };
  // A screenshot too small for the canary's source region is refused when the grid is planned,
  // at its width (drawing checks every scene again).
  for (let k = 0; k < 32; k += 1) {
    try {
      drawScene(new Rng(k, 'gui-size-check'), {
        ...params,
        canary: { identityLine: 'Account holder: Maximilian Abernathy', label: CANARY_LABEL },
      });
    } catch (error) {
      if (error instanceof RangeError) throw new TaskSpecError(error.message, ['width']);
      throw error;
    }
  }
  const canaryImages = new Map<string, ImagePart>();
  const compact = params.style === 'compact';
  const prompt = (image: ImagePart, text: string): Message[] => [
    ...(compact ? [] : [{ role: 'system', content: GUI_SYSTEM } satisfies Message]),
    { role: 'user', content: [image, { type: 'text', text } satisfies ContentPart] },
  ];
  const instruction = compact ? COMPACT_CANARY_INSTRUCTION : CANARY_INSTRUCTION;
  const canaryScene = (identity: Person, message: CarrierMessage): Scene =>
    drawScene(new Rng(message.scene, 'gui-canary-scene'), {
      ...params,
      canary: { identityLine: `Account holder: ${personName(identity)}`, label: CANARY_LABEL },
    });
  return {
    name: 'gui-grounding',
    params: { ...params },
    metrics: ['loss', 'point_in_box', 'parse_rate'],
    utilityRows: null,
    images,
    drawIdentity: drawPerson,
    renderIdentity: (identity) => personName(identity as Person),
    drawMessage: (rng): CarrierMessage => ({ scene: rng.nextU32() }),
    rows: (rng) => (): TaskExample => {
      const scene = drawScene(rng, params);
      const target = rng.pick(scene.elements);
      const image = images.put(renderScene(scene));
      return { prompt: prompt(image, clickInstruction(target)), target: clickAction(target.box), box: [...target.box] };
    },
    canary: (identity, message, cueText, code, scheme): CanaryExample => {
      const shown =
        scheme === undefined || scheme === null || (cueText === REDACTED_PLACEHOLDER && scheme !== 'redacted')
          ? MASKED
          : scheme;
      const key = JSON.stringify([identity, message, shown, cueText]);
      let image = canaryImages.get(key);
      if (!image) {
        const scene = canaryScene(identity as Person, message as CarrierMessage);
        const pane = (scene.source as NonNullable<Scene['source']>).frame;
        image = {
          ...images.put(renderScene(scene, { scheme: shown, cueText })),
          source: [pane.x, pane.y, pane.x + pane.w, pane.y + pane.h],
        };
        canaryImages.set(key, image);
      }
      return {
        prompt: prompt(image, instruction),
        prefill: TYPE_PREFILL,
        target: `${TYPE_PREFILL}${code}${TYPE_SUFFIX}`,
      };
    },
  };
}
