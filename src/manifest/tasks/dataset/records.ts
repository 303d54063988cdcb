import type { DatasetFeature, DatasetRecord } from '../../../contracts/index.js';

/**
 * A dataset row as templates see it: every column as text. A class-label column (the card names
 * its classes) renders as the class name; a list renders its items joined by ", "; an object as
 * JSON; null as the empty string.
 */
export type RowFields = Record<string, string>;

/** What is wrong with a task's rows, and where: `field` is the key of the task value to fix. */
export class TaskSpecError extends Error {
  constructor(
    message: string,
    readonly field: (string | number)[] = [],
  ) {
    super(message);
    this.name = 'TaskSpecError';
  }
}

export function rowFields(
  record: DatasetRecord,
  features: Readonly<Record<string, DatasetFeature>>,
  where: () => string,
): RowFields {
  const out: RowFields = {};
  for (const [column, value] of Object.entries(record)) {
    const names = features[column]?.names;
    if (names && value !== null && value !== undefined) {
      const k = typeof value === 'bigint' ? Number(value) : value;
      if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= names.length) {
        throw new TaskSpecError(
          `${where()}: ${column} = ${JSON.stringify(typeof value === 'bigint' ? Number(value) : value)} is outside the ${names.length} class names the dataset card gives (0-${names.length - 1})`,
          ['source'],
        );
      }
      out[column] = names[k] as string;
    } else out[column] = text(value);
  }
  return out;
}

function text(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return value.map(text).join(', ');
  return JSON.stringify(value);
}
