import { expect } from 'vitest';
import { describeSchemaErrors, validate, type SchemaName } from '../../src/schemas/index.js';

/** A printed `--json` output, parsed and checked against its schema in schemas/ (no error). */
export function expectOutput<T = Record<string, unknown>>(schema: SchemaName, text: string): T {
  const value = JSON.parse(text) as T;
  expect(describeSchemaErrors(validate(schema, value))).toEqual([]);
  return value;
}
