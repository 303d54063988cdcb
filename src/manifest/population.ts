import type { CohortSpec, PopulationValue } from '../grid/index.js';

/**
 * Which canaries share a run. The focal cohort (ids f000…) sits at the cell's dose and placement;
 * auxiliary cohorts (ids x<k>-000…) keep their index k across cells, so x<k> is the same set of
 * canaries, at the same dose, wherever it appears.
 */
export interface ResolvedCohort extends CohortSpec {
  /** Cohort index: the ids are x<index>-000, x<index>-001, … */
  index: number;
}

export interface ResolvedPopulation {
  /** False for a no-canary control run. */
  focal: boolean;
  aux: ResolvedCohort[];
}

/**
 * `mixed-dose` adds one companion cohort per listed dose (default: every dose of the dose axis)
 * other than the cell's own, each as large as the focal cohort, placed like it. Its index is the
 * dose's position in that list, so a companion cohort means the same dose in every cell.
 */
export function resolvePopulation(
  population: PopulationValue,
  cellDose: number | null,
  doseAxis: readonly number[],
  focalCount: number,
): ResolvedPopulation {
  switch (population.kind) {
    case 'none':
      return { focal: false, aux: [] };
    case 'single-dose':
      return { focal: true, aux: [] };
    case 'mixed-dose': {
      const doses = population.doses ?? [...doseAxis].sort((a, b) => a - b);
      const aux: ResolvedCohort[] = [];
      doses.forEach((dose, index) => {
        if (dose === cellDose) return;
        aux.push({
          index,
          name: `dose-${dose}`,
          dose,
          count: population.count ?? focalCount,
          order: 'with',
          window: null,
          spacing: null,
        });
      });
      return { focal: true, aux };
    }
    case 'cohorts':
      return { focal: true, aux: (population.cohorts ?? []).map((c, index) => ({ ...c, index })) };
  }
}

export function auxCanaryId(cohortIndex: number, j: number): string {
  return `x${cohortIndex}-${String(j).padStart(3, '0')}`;
}

export function focalCanaryId(j: number): string {
  return `f${String(j).padStart(3, '0')}`;
}

export function heldOutCanaryId(j: number): string {
  return `h${String(j).padStart(3, '0')}`;
}
