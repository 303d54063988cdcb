import type { VarianceComponents } from '../metrics/bootstrap.js';
import type { ModelValue } from '../grid/types.js';

/**
 * Variance components `plan --power` assumes without a pilot audit, per model backend: standard
 * deviations in bits of a run's effect, a canary's effect and their interaction, for one arm's
 * median (`arm`) and for a paired difference's median (`paired`), each as `assumedComponents`
 * scales them (metrics/verdict.ts). Measured ones are pooled from real audits' estimated
 * components (`pooledSd`, over every crossed arm and paired difference of hidden probes; command
 * and figures in docs/metrics.md, "Verdicts and power"); a backend no audit has measured yet keeps
 * the coverage bench's generator and says so.
 */
export type PowerBackend = 'tiny' | 'tiny-vlm' | 'hf';

export interface ComponentSd {
  run: number;
  canary: number;
  interaction: number;
}

export interface PowerDefaults {
  backend: PowerBackend;
  arm: ComponentSd;
  paired: ComponentSd;
  /** True when pooled from real audits; false for the generator's planning values. */
  measured: boolean;
  /** Where the figures come from (audits and commit, or the generator). */
  source: string;
}

/** The coverage bench's generator (bench/coverage.ts): a planning guess, not a measurement. */
const GENERATOR: Pick<PowerDefaults, 'arm' | 'paired' | 'measured' | 'source'> = {
  arm: { run: 1.5, canary: 2, interaction: 1 },
  paired: { run: 1.5, canary: 2, interaction: Math.SQRT2 },
  measured: false,
  source: "the coverage bench's generator, not measured on this backend",
};

export const POWER_DEFAULTS: Record<PowerBackend, PowerDefaults> = {
  // `npx tsx bench/power-defaults.ts` over the three text claim grids re-run under the one-base
  // design, controller built at dfaa978, CPU float32 (docs/reproduction.md): directions-cpu
  // audit-1d1fa6e5bfce, cohort-order-cpu audit-effece4dbf02, banking77-cpu audit-9e5ebbe2a66b;
  // 29 arm medians, 17 paired differences.
  tiny: {
    backend: 'tiny',
    arm: { run: 0.41, canary: 0.99, interaction: 1.68 },
    paired: { run: 0.41, canary: 1.14, interaction: 2.7 },
    measured: true,
    source:
      'pooled from the claim grids directions-cpu audit-1d1fa6e5bfce, cohort-order-cpu audit-effece4dbf02 and banking77-cpu audit-9e5ebbe2a66b at dfaa978, 3 seeds of one base each',
  },
  'tiny-vlm': { backend: 'tiny-vlm', ...GENERATOR },
  hf: { backend: 'hf', ...GENERATOR },
};

/** Which defaults a model takes: the tiny VLM (a tiny model with a vision stem), the tiny text model, or hf. */
export function powerBackendOf(model: Pick<ModelValue, 'backend' | 'tiny'>): PowerBackend {
  if (model.backend === 'hf') return 'hf';
  return model.tiny?.vision ? 'tiny-vlm' : 'tiny';
}

/**
 * The defaults for a grid's models: one backend's, or with several, the backend whose arm variance
 * (run + canary + interaction, per unit) is largest, so that a plan is not optimistic for any model.
 */
export function powerDefaultsFor(models: readonly Pick<ModelValue, 'backend' | 'tiny'>[]): {
  defaults: PowerDefaults;
  backends: PowerBackend[];
} {
  const backends = [...new Set(models.map(powerBackendOf))];
  const total = (d: PowerDefaults): number => d.arm.run ** 2 + d.arm.canary ** 2 + d.arm.interaction ** 2;
  const list = (backends.length > 0 ? backends : (['tiny'] as PowerBackend[])).map((b) => POWER_DEFAULTS[b]);
  const defaults = list.reduce((a, b) => (total(b) > total(a) ? b : a));
  return { defaults, backends };
}

/** The median's efficiency against the mean for normal canary effects (assumedComponents' factor). */
const EFFICIENCY = Math.PI / 2;

/**
 * Per-unit standard deviations implied by one crossed median's components, the inverse of
 * `assumedComponents`: run² = run · R, canary² = canary · C / (π/2), interaction² = residual · R · C
 * / (π/2). Null for a nested median (its canary part is not separated from the interaction).
 */
export function sdOfComponents(c: VarianceComponents): ComponentSd | null {
  if (c.design !== 'crossed') return null;
  return {
    run: Math.sqrt(c.run * c.runs),
    canary: Math.sqrt((c.canary * c.canaries) / EFFICIENCY),
    interaction: Math.sqrt((c.residual * c.runs * c.canaries) / EFFICIENCY),
  };
}

/** Root mean square of the per-unit sds over many medians' components (crossed ones); null when none. */
export function pooledSd(components: readonly VarianceComponents[]): { sd: ComponentSd; n: number } | null {
  const sds = components.map(sdOfComponents).filter((s): s is ComponentSd => s !== null);
  if (sds.length === 0) return null;
  const rms = (k: keyof ComponentSd): number => Math.sqrt(sds.reduce((a, s) => a + s[k] ** 2, 0) / sds.length);
  return { sd: { run: rms('run'), canary: rms('canary'), interaction: rms('interaction') }, n: sds.length };
}
