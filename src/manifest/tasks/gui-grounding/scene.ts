import type { SKRSContext2D } from '@napi-rs/canvas';
import type { Rng } from '../../../random.js';
import { drawRegion, font, renderPng, type Rect, type RenderedPng } from '../../images/index.js';

/**
 * Synthetic desktop screenshots for GUI grounding: a desktop with a taskbar, one or two
 * application windows with a title bar, a toolbar of named buttons, labelled text fields and a
 * search field, and, in some, a source pane (a notes panel). Every interactive element has a
 * name and a box, so "click <element>" has a known answer. Scenes are drawn from the seeded
 * generator and rendered with only rectangles and the shipped font, so they cost no download and
 * the same seed gives the same PNG.
 */
export type ElementKind = 'button' | 'field' | 'tab';

export interface SceneElement {
  kind: ElementKind;
  name: string;
  /** [x0, y0, x1, y1] in pixels. */
  box: [number, number, number, number];
}

export interface SceneWindow {
  title: string;
  frame: Rect;
}

export interface SourcePane {
  frame: Rect;
  /** Text lines above the region (a canary's identity line and the region's label). */
  lines: string[];
  /** Where a canary's code is drawn; null in a background scene's notes pane. */
  region: Rect | null;
  /** The notes text of a background scene's pane (no code, no identity). */
  notes: string[];
}

export interface Scene {
  width: number;
  height: number;
  theme: Theme;
  windows: SceneWindow[];
  elements: SceneElement[];
  /** The search field that has the keyboard focus (drawn with a focus ring and a caret). */
  focused: SceneElement | null;
  source: SourcePane | null;
}

interface Theme {
  desktop: string;
  chrome: string;
  title: string;
  window: string;
  accent: string;
  text: string;
  pane: string;
}

const THEMES: readonly Theme[] = [
  {
    desktop: '#2f5d7c',
    chrome: '#d8dde3',
    title: '#3c4a5a',
    window: '#f4f5f7',
    accent: '#2b6cb0',
    text: '#1a202c',
    pane: '#fffbea',
  },
  {
    desktop: '#4a3f6b',
    chrome: '#e2e2e2',
    title: '#2d2d2d',
    window: '#ffffff',
    accent: '#8b3fb0',
    text: '#111111',
    pane: '#f0f7ff',
  },
  {
    desktop: '#3d6b4a',
    chrome: '#dcdcd4',
    title: '#44503f',
    window: '#fafaf5',
    accent: '#2f855a',
    text: '#1c1c1c',
    pane: '#fff5f5',
  },
  {
    desktop: '#6b4a3d',
    chrome: '#e6e1dc',
    title: '#5a3c2f',
    window: '#fbf8f5',
    accent: '#c05621',
    text: '#201a17',
    pane: '#f5fff7',
  },
];

export const APPS: readonly string[] = [
  'Mail',
  'Files',
  'Calendar',
  'Settings',
  'Invoices',
  'Contacts',
  'Editor',
  'Terminal',
  'Photos',
  'Music',
  'Notes',
  'Browser',
  'Orders',
  'Tickets',
];
export const BUTTONS: readonly string[] = [
  'Save',
  'Cancel',
  'Open',
  'Close',
  'Export',
  'Import',
  'Print',
  'Share',
  'Delete',
  'Rename',
  'Refresh',
  'Submit',
  'Apply',
  'Undo',
  'Redo',
  'Copy',
  'Paste',
  'Upload',
  'Download',
  'Archive',
  'Reply',
  'Forward',
  'Send',
  'Filter',
  'Sort',
  'Help',
  'Next',
  'Back',
];
export const FIELDS: readonly string[] = [
  'Name',
  'Email',
  'Phone',
  'City',
  'Street',
  'Company',
  'Title',
  'Subject',
  'Amount',
  'Date',
  'Folder',
  'Tag',
  'Notes',
  'Country',
];
export const TABS: readonly string[] = [
  'General',
  'Details',
  'History',
  'Security',
  'Sharing',
  'Advanced',
  'Overview',
  'Activity',
];
const NOTE_WORDS: readonly string[] = [
  'meeting',
  'moved',
  'to',
  'next',
  'week',
  'check',
  'the',
  'draft',
  'before',
  'sending',
  'call',
  'back',
  'after',
  'lunch',
  'order',
  'shipped',
  'review',
  'pending',
  'budget',
  'approved',
];

/** The smallest source region a code can be drawn in legibly. */
export const MIN_REGION = { w: 48, h: 12 } as const;

export interface SceneOptions {
  width: number;
  height: number;
  /** A canary scene: a source pane with a code region and a focused search field, always. */
  canary?: { identityLine: string; label: string } | undefined;
}

/** Type scale of a scene: a text line is `unit` pixels high. */
export function sceneUnit(height: number): number {
  return Math.max(8, Math.round(height / 24));
}

export function drawScene(rng: Rng, options: SceneOptions): Scene {
  const { width, height } = options;
  const u = sceneUnit(height);
  const theme = rng.pick(THEMES);
  const elements: SceneElement[] = [];
  const used = new Set<string>();
  const take = (names: readonly string[]): string => {
    for (let tries = 0; tries < 100; tries += 1) {
      const name = rng.pick(names);
      if (!used.has(name)) {
        used.add(name);
        return name;
      }
    }
    throw new RangeError('ran out of distinct element names');
  };
  const taskbar = Math.round(u * 1.6);
  const canary = options.canary;
  // The main window covers most of the desktop, at a drawn offset.
  const margin = Math.round(u * 0.8);
  const wx = margin + rng.int(margin + 1);
  const wy = margin + rng.int(margin + 1);
  const frame: Rect = {
    x: wx,
    y: wy,
    w: width - wx - margin - rng.int(margin + 1),
    h: height - taskbar - wy - margin - rng.int(margin + 1),
  };
  const windows: SceneWindow[] = [{ title: rng.pick(APPS), frame }];
  const titleH = Math.round(u * 1.4);
  // Toolbar of buttons along the top of the window.
  let x = frame.x + Math.round(u * 0.5);
  const toolY = frame.y + titleH + Math.round(u * 0.4);
  const buttonH = Math.round(u * 1.4);
  const nButtons = 3 + rng.int(3);
  for (let k = 0; k < nButtons; k += 1) {
    const name = take(BUTTONS);
    const w = Math.round(u * (name.length * 0.62 + 1.4));
    if (x + w > frame.x + frame.w - u) break;
    elements.push({ kind: 'button', name, box: [x, toolY, x + w, toolY + buttonH] });
    x += w + Math.round(u * 0.4);
  }
  // Tabs under the toolbar.
  const tabY = toolY + buttonH + Math.round(u * 0.5);
  x = frame.x + Math.round(u * 0.5);
  for (let k = 0, n = 2 + rng.int(2); k < n; k += 1) {
    const name = take(TABS);
    const w = Math.round(u * (name.length * 0.62 + 1));
    if (x + w > frame.x + frame.w / 2) break;
    elements.push({ kind: 'tab', name, box: [x, tabY, x + w, tabY + buttonH] });
    x += w;
  }
  // Left column: labelled fields, the search field first. Right column: the source pane.
  const bodyY = tabY + buttonH + Math.round(u * 0.6);
  const paneShown = canary !== undefined || rng.int(2) === 0;
  const colW = paneShown ? Math.round(frame.w * 0.5) : frame.w - u;
  const labelW = Math.round(u * 4.6);
  const fieldX = frame.x + Math.round(u * 0.5) + labelW;
  const fieldW = Math.max(u * 3, colW - labelW - u);
  const fieldH = Math.round(u * 1.3);
  let y = bodyY;
  let focused: SceneElement | null = null;
  const withSearch = canary !== undefined || rng.int(3) > 0;
  if (withSearch) {
    const search: SceneElement = { kind: 'field', name: 'Search', box: [fieldX, y, fieldX + fieldW, y + fieldH] };
    used.add('Search');
    elements.push(search);
    if (canary !== undefined || rng.int(2) === 0) focused = search;
    y += fieldH + Math.round(u * 0.5);
  }
  const bottom = frame.y + frame.h - Math.round(u * 0.5);
  for (let k = 0, n = 2 + rng.int(4); k < n && y + fieldH <= bottom; k += 1) {
    elements.push({ kind: 'field', name: take(FIELDS), box: [fieldX, y, fieldX + fieldW, y + fieldH] });
    y += fieldH + Math.round(u * 0.5);
  }
  let source: SourcePane | null = null;
  if (paneShown) {
    const px = frame.x + colW + Math.round(u * 0.5);
    const pw = frame.x + frame.w - Math.round(u * 0.5) - px;
    const ph = Math.min(bottom - bodyY, Math.round(u * 7.5));
    const pane: Rect = { x: px, y: bodyY, w: pw, h: ph };
    if (canary) {
      const top = bodyY + Math.round(u * 0.4) + 2 * Math.round(u * 1.1);
      const region: Rect = {
        x: px + Math.round(u * 0.4),
        y: top,
        w: pw - Math.round(u * 0.8),
        h: bodyY + ph - Math.round(u * 0.4) - top,
      };
      const inside = region.x >= 0 && region.y >= 0 && region.x + region.w <= width && region.y + region.h <= height;
      if (!inside || region.w < MIN_REGION.w || region.h < MIN_REGION.h) {
        throw new RangeError(
          `a ${width}x${height} screenshot leaves the canary's source region ${inside ? `${region.w}x${region.h} px, under the ${MIN_REGION.w}x${MIN_REGION.h} a code needs` : 'outside the image'}; make the screenshot larger (at least about 320x200)`,
        );
      }
      source = { frame: pane, lines: [canary.identityLine, canary.label], region, notes: [] };
    } else {
      const notes = Array.from({ length: 3 + rng.int(3) }, () =>
        Array.from({ length: 2 + rng.int(3) }, () => rng.pick(NOTE_WORDS)).join(' '),
      );
      source = { frame: pane, lines: ['Notes'], region: null, notes };
    }
  }
  // Taskbar buttons: the apps, one of them the window's.
  x = Math.round(u * 0.4);
  for (let k = 0, n = 2 + rng.int(3); k < n; k += 1) {
    const name = take(APPS.filter((a) => a !== windows[0]?.title));
    const w = Math.round(u * (name.length * 0.62 + 1.2));
    elements.push({ kind: 'button', name, box: [x, height - taskbar + 2, x + w, height - 2] });
    x += w + Math.round(u * 0.3);
  }
  return { width, height, theme, windows, elements, focused, source };
}

/** How a scene's source region is drawn: the visibility scheme's renderer and its cue text. */
export interface RegionContent {
  scheme: string;
  cueText: string;
}

/** Render a scene; `region` fills a canary scene's source region (required there). */
export function renderScene(scene: Scene, region?: RegionContent): RenderedPng {
  return renderPng(scene.width, scene.height, (g) => {
    const u = sceneUnit(scene.height);
    const t = scene.theme;
    g.fillStyle = t.desktop;
    g.fillRect(0, 0, scene.width, scene.height);
    const taskbar = Math.round(u * 1.6);
    g.fillStyle = t.chrome;
    g.fillRect(0, scene.height - taskbar, scene.width, taskbar);
    for (const w of scene.windows) drawWindow(g, w, t, u);
    for (const e of scene.elements) drawElement(g, e, t, u, e === scene.focused);
    const pane = scene.source;
    if (pane) {
      g.fillStyle = t.pane;
      g.fillRect(pane.frame.x, pane.frame.y, pane.frame.w, pane.frame.h);
      g.fillStyle = t.text;
      g.fillRect(pane.frame.x, pane.frame.y, pane.frame.w, 1);
      g.fillRect(pane.frame.x, pane.frame.y + pane.frame.h - 1, pane.frame.w, 1);
      g.fillRect(pane.frame.x, pane.frame.y, 1, pane.frame.h);
      g.fillRect(pane.frame.x + pane.frame.w - 1, pane.frame.y, 1, pane.frame.h);
      const lineH = Math.round(u * 1.1);
      g.font = font(Math.round(u * 0.75));
      [...pane.lines, ...pane.notes].forEach((line, k) => {
        g.fillText(
          fit(g, line, pane.frame.w - u),
          pane.frame.x + Math.round(u * 0.4),
          pane.frame.y + Math.round(u * 0.4) + k * lineH,
        );
      });
      if (pane.region) {
        if (!region) throw new RangeError('a canary scene needs its source region content');
        drawRegion(g, region.scheme, pane.region, region.cueText, { background: t.pane, ink: t.text });
      }
    }
  });
}

function drawWindow(g: SKRSContext2D, w: SceneWindow, t: Theme, u: number): void {
  const f = w.frame;
  g.fillStyle = '#00000040';
  g.fillRect(f.x + 3, f.y + 3, f.w, f.h);
  g.fillStyle = t.window;
  g.fillRect(f.x, f.y, f.w, f.h);
  const titleH = Math.round(u * 1.4);
  g.fillStyle = t.title;
  g.fillRect(f.x, f.y, f.w, titleH);
  g.fillStyle = '#ffffff';
  g.font = font(Math.round(u * 0.8), true);
  g.fillText(w.title, f.x + Math.round(u * 0.5), f.y + Math.round(u * 0.3));
  // Window controls: three squares at the right of the title bar.
  for (let k = 0; k < 3; k += 1) {
    const s = Math.round(u * 0.7);
    g.fillRect(f.x + f.w - (k + 1) * (s + Math.round(u * 0.3)), f.y + Math.round((titleH - s) / 2), s, s);
  }
}

function drawElement(g: SKRSContext2D, e: SceneElement, t: Theme, u: number, focused: boolean): void {
  const [x0, y0, x1, y1] = e.box;
  const w = x1 - x0;
  const h = y1 - y0;
  const px = Math.round(u * 0.75);
  g.font = font(px);
  if (e.kind === 'button') {
    g.fillStyle = t.chrome;
    g.fillRect(x0, y0, w, h);
    g.fillStyle = t.text;
    outline(g, x0, y0, w, h);
    g.fillText(fit(g, e.name, w - 4), x0 + Math.round(u * 0.5), y0 + Math.round((h - px) / 2));
  } else if (e.kind === 'tab') {
    g.fillStyle = t.window;
    g.fillRect(x0, y0, w, h);
    g.fillStyle = t.accent;
    g.fillRect(x0, y1 - 2, w, 2);
    g.fillStyle = t.text;
    g.fillText(fit(g, e.name, w - 4), x0 + Math.round(u * 0.4), y0 + Math.round((h - px) / 2));
  } else {
    g.fillStyle = t.text;
    g.fillText(`${e.name}:`, x0 - Math.round(u * 4.4), y0 + Math.round((h - px) / 2));
    g.fillStyle = '#ffffff';
    g.fillRect(x0, y0, w, h);
    g.fillStyle = focused ? t.accent : '#8a8f98';
    outline(g, x0, y0, w, h);
    if (focused) {
      outline(g, x0 + 1, y0 + 1, w - 2, h - 2);
      g.fillStyle = t.text;
      g.fillRect(x0 + Math.round(u * 0.4), y0 + 3, 1, h - 6);
    } else if (e.name === 'Search') {
      g.fillStyle = '#8a8f98';
      g.fillText('Search…'.replace('…', '...'), x0 + Math.round(u * 0.4), y0 + Math.round((h - px) / 2));
    }
  }
}

function outline(g: SKRSContext2D, x: number, y: number, w: number, h: number): void {
  g.fillRect(x, y, w, 1);
  g.fillRect(x, y + h - 1, w, 1);
  g.fillRect(x, y, 1, h);
  g.fillRect(x + w - 1, y, 1, h);
}

/** The text cut (with a trailing '..') to fit `width` pixels in the current font. */
function fit(g: SKRSContext2D, text: string, width: number): string {
  if (g.measureText(text).width <= width) return text;
  let cut = text;
  while (cut.length > 1 && g.measureText(`${cut}..`).width > width) cut = cut.slice(0, -1);
  return `${cut}..`;
}
