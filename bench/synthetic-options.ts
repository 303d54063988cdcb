/**
 * The options shared by the benches that simulate paired audits on the coverage bench's generator
 * (`test/fixtures/synthetic-audit.ts`): bench/power.ts and bench/sequential.ts. Each bench gives its
 * own defaults for the number of audits, resamples and shifts, and adds its own options beside.
 */
export function syntheticOptions(defaults: { sims: string; resamples: string; shifts: string }) {
  return {
    sims: { type: 'string', default: defaults.sims },
    canaries: { type: 'string', default: '16' },
    resamples: { type: 'string', default: defaults.resamples },
    seed: { type: 'string', default: '1' },
    margin: { type: 'string', default: '1' },
    run: { type: 'string', default: '1.5' },
    canary: { type: 'string', default: '2' },
    interaction: { type: 'string', default: '1' },
    shifts: { type: 'string', default: defaults.shifts },
    record: { type: 'string' },
    help: { type: 'boolean', default: false },
  } as const;
}

type SyntheticValues = Record<
  'sims' | 'canaries' | 'resamples' | 'seed' | 'margin' | 'run' | 'canary' | 'interaction' | 'shifts',
  string
>;

/** The parsed values as numbers: the variance components (sd in bits) and the true shifts (bits). */
export function syntheticSettings(values: SyntheticValues) {
  return {
    sims: Number(values.sims),
    canaries: Number(values.canaries),
    resamples: Number(values.resamples),
    seed: Number(values.seed),
    margin: Number(values.margin),
    components: { run: Number(values.run), canary: Number(values.canary), interaction: Number(values.interaction) },
    shifts: values.shifts.split(',').map(Number),
  };
}
