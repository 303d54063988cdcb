import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
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

const ajv = new Ajv2020({ allErrors: true, useDefaults: true, strict: true, allowUnionTypes: true });
let sharedAdded = false;
const compiled = new Map<SchemaName, ValidateFunction>();

export function schemaPath(name: SchemaName | 'stamp'): string {
  return join(SCHEMAS_DIR, `${name}.schema.json`);
}

export function loadSchema(name: SchemaName | 'stamp'): Record<string, unknown> {
  return JSON.parse(readFileSync(schemaPath(name), 'utf8')) as Record<string, unknown>;
}

export function validator(name: SchemaName): ValidateFunction {
  let fn = compiled.get(name);
  if (!fn) {
    if (!sharedAdded) {
      for (const shared of SHARED_SCHEMAS) {
        ajv.addSchema(JSON.parse(readFileSync(join(SCHEMAS_DIR, `${shared}.schema.json`), 'utf8')) as object);
      }
      sharedAdded = true;
    }
    for (const dependency of REFERENCED[name] ?? []) validator(dependency);
    fn = ajv.compile(loadSchema(name));
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
