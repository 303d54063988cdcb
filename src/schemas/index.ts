import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { SCHEMAS_DIR } from '../paths.js';

/**
 * The versioned JSON Schemas in `schemas/` (the contract between controller and trainer), compiled
 * once per process. `useDefaults` fills defaults in place, so validation is also normalisation.
 */
export type SchemaName =
  | 'grid'
  | 'manifest'
  | 'progress'
  | 'result'
  | 'row'
  | 'report'
  | 'audit'
  | 'plan-output'
  | 'status-output'
  | 'submit-output'
  | 'run-output'
  | 'report-output'
  | 'cancel-output'
  | 'fleet-output';

/** Schemas referenced by others through their `$id`; registered before anything compiles. */
const SHARED_SCHEMAS = ['stamp', 'model-revisions'];
/** Schemas whose definitions others reference (`report.schema.json#/$defs/verdict`): compiled first. */
const REFERENCED: Partial<Record<SchemaName, SchemaName[]>> = {
  'run-output': ['report'],
  'status-output': ['report'],
};

let ajv: Ajv2020 | undefined;
const compiled = new Map<SchemaName, ValidateFunction>();

/**
 * Ajv, loaded at the first validation rather than at import (a tenth of a second or more of start-up):
 * commands that import the contracts without validating anything, like `status`, never load it.
 */
function schemaCompiler(): Ajv2020 {
  if (!ajv) {
    const { Ajv2020: Compiler } = createRequire(import.meta.url)(
      'ajv/dist/2020.js',
    ) as typeof import('ajv/dist/2020.js');
    ajv = new Compiler({ allErrors: true, useDefaults: true, strict: true, allowUnionTypes: true });
    for (const shared of SHARED_SCHEMAS)
      ajv.addSchema(JSON.parse(readFileSync(join(SCHEMAS_DIR, `${shared}.schema.json`), 'utf8')) as object);
  }
  return ajv;
}
export function schemaPath(name: SchemaName | 'stamp'): string {
  return join(SCHEMAS_DIR, `${name}.schema.json`);
}

export function loadSchema(name: SchemaName | 'stamp'): Record<string, unknown> {
  return JSON.parse(readFileSync(schemaPath(name), 'utf8')) as Record<string, unknown>;
}

export function validator(name: SchemaName): ValidateFunction {
  let fn = compiled.get(name);
  if (!fn) {
    for (const dependency of REFERENCED[name] ?? []) validator(dependency);
    fn = schemaCompiler().compile(loadSchema(name));
    compiled.set(name, fn);
  }
  return fn;
}

/** Validate `value` (applying defaults in place); returns the errors, empty when valid. */
export function validate(name: SchemaName, value: unknown): ErrorObject[] {
  const fn = validator(name);
  return fn(value) ? [] : [...(fn.errors ?? [])];
}

/** One readable line per ajv error: `path: message`. */
export function describeSchemaErrors(errors: ErrorObject[]): string[] {
  return errors.map((e) => {
    const path = e.instancePath === '' ? '(root)' : e.instancePath.slice(1).replaceAll('/', '.');
    if (e.keyword === 'additionalProperties') {
      return `${path}: unknown key ${JSON.stringify((e.params as { additionalProperty: string }).additionalProperty)}`;
    }
    if (e.keyword === 'enum') {
      return `${path}: ${e.message} (${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')})`;
    }
    return `${path}: ${e.message ?? e.keyword}`;
  });
}

export type { ErrorObject };
