import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { quoteValue, UserInputError } from '../errors.js';
import { loadSchema } from '../schemas/index.js';
import { closest } from './suggest.js';
import { formatPath, type GridPath, type GridSource } from './source.js';

/**
 * Turns grid-schema violations into one line each that names the place, the bad value and what
 * would be valid. Ajv alone reports every failing `oneOf` branch (a bad placement yields errors
 * for the string, window and object forms at once), so this walks the schema beside the data,
 * picks the branch the user evidently meant (by JSON type and discriminating `const`s), and
 * explains only that branch; when no branch fits, it says which forms are accepted.
 */
type Schema = Record<string, unknown>;

let grid: { root: Schema; id: string; ajv: Ajv2020; cache: Map<string, ValidateFunction> } | undefined;

function gridSchema(): NonNullable<typeof grid> {
  if (!grid) {
    const root = loadSchema('grid');
    const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
    ajv.addSchema(root);
    grid = { root, id: root.$id as string, ajv, cache: new Map() };
  }
  return grid;
}

function nodeAt(pointer: string): Schema {
  let node: unknown = gridSchema().root;
  for (const part of pointer.split('/').slice(1))
    node = (node as Schema)[part.replaceAll('~1', '/').replaceAll('~0', '~')];
  return node as Schema;
}

/** Follow `$ref`s (all local to the grid schema) to the schema that does the work. */
function deref(pointer: string): string {
  let node = nodeAt(pointer);
  while (typeof node.$ref === 'string') {
    pointer = (node.$ref as string).replace(/^#/, '');
    node = nodeAt(pointer);
  }
  return pointer;
}

function validatorAt(pointer: string): ValidateFunction {
  const g = gridSchema();
  let fn = g.cache.get(pointer);
  if (!fn) {
    fn = g.ajv.getSchema(`${g.id}#${pointer}`);
    if (!fn) throw new Error(`grid schema has no node at ${pointer}`);
    g.cache.set(pointer, fn);
  }
  return fn;
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (Number.isInteger(value)) return 'integer';
  return typeof value;
}

function acceptsType(branch: Schema, value: unknown): boolean {
  const t = jsonType(value);
  let types: string[] | undefined;
  if (branch.type !== undefined) types = ([] as string[]).concat(branch.type as string | string[]);
  else if (Array.isArray(branch.enum)) types = (branch.enum as unknown[]).map(jsonType);
  else if ('const' in branch) types = [jsonType(branch.const)];
  if (!types) return true;
  return types.includes(t) || (t === 'integer' && types.includes('number'));
}

/**
 * A branch whose properties pin a key with `const` is ruled out when the value disagrees; with
 * `enums`, one whose `name` key lists its values in an `enum` the value is not in, too.
 */
function constsAgree(branch: Schema, value: unknown, enums = false): boolean {
  if (jsonType(value) !== 'object') return true;
  const props = (branch.properties ?? {}) as Record<string, Schema>;
  for (const [key, prop] of Object.entries(props)) {
    if (!(key in (value as object))) continue;
    const v = (value as Record<string, unknown>)[key];
    if ('const' in prop && v !== prop.const) return false;
    if (enums && key === 'name' && Array.isArray(prop.enum) && !(prop.enum as unknown[]).includes(v)) return false;
  }
  return true;
}

/** The schema pointer governing the child `segment` of the value at `pointer`, if any. */
function childPointer(pointer: string, segment: string): string | undefined {
  const node = nodeAt(pointer);
  const props = node.properties as Record<string, unknown> | undefined;
  if (props && segment in props) return `${pointer}/properties/${segment}`;
  if (/^\d+$/.test(segment) && typeof node.items === 'object') return `${pointer}/items`;
  if (typeof node.additionalProperties === 'object') return `${pointer}/additionalProperties`;
  return undefined;
}

function valueAt(value: unknown, rel: string[]): unknown {
  let v = value;
  for (const s of rel) v = Array.isArray(v) ? v[Number(s)] : (v as Record<string, unknown> | undefined)?.[s];
  return v;
}

function toPath(base: GridPath, rel: string[], value: unknown): (string | number)[] {
  const out: (string | number)[] = [...base];
  let v = value;
  for (const s of rel) {
    out.push(Array.isArray(v) ? Number(s) : s);
    v = Array.isArray(v) ? v[Number(s)] : (v as Record<string, unknown> | undefined)?.[s];
  }
  return out;
}

export function explainGridErrors(source: GridSource, data: unknown): UserInputError[] {
  const errors = explain(source, '', data, []);
  // A preset key under `models:` that is not a valid name fails there, and again in every axis
  // entry naming it: the key's own line is the specific one.
  const models = (data as { models?: unknown } | null)?.models;
  const badKeys =
    models && typeof models === 'object'
      ? Object.keys(models).filter((k) => !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(k))
      : [];
  return errors.filter(
    (e) =>
      !(
        e.field !== undefined &&
        /^axes\.model\[\d+\]$/.test(e.field) &&
        badKeys.some((k) => e.message.includes(`${JSON.stringify(k)} is not valid here`))
      ),
  );
}

function explain(source: GridSource, pointer: string, value: unknown, path: GridPath): UserInputError[] {
  pointer = deref(pointer);
  const node = nodeAt(pointer);
  if (Array.isArray(node.oneOf)) {
    const branches = (node.oneOf as Schema[]).map((_, i) => deref(`${pointer}/oneOf/${i}`));
    // The branch the value's name picks (a task's {name: gui-grounding, ...}), else the one its
    // type and consts leave (an unknown name is explained by the branch whose enum lists names).
    const named = branches.filter((b) => acceptsType(nodeAt(b), value) && constsAgree(nodeAt(b), value, true));
    const fits =
      named.length === 1
        ? named
        : branches.filter((b) => acceptsType(nodeAt(b), value) && constsAgree(nodeAt(b), value));
    if (fits.length === 1) return explain(source, fits[0] as string, value, path);
    const expected = (node.description as string | undefined) ?? 'a valid value';
    return [issue(source, path, `${quoteValue(value)} is not valid here; expected ${expected}`)];
  }
  const fn = validatorAt(pointer);
  if (fn(value)) return [];
  const out: UserInputError[] = [];
  const boundaries = new Set<string>();
  const errors = fn.errors ?? [];
  // A key misspelt is one problem, not two: "unknown key trainng (did you mean training?)" says
  // it; "missing required key training" at the same object would say it again.
  const misspelt = new Set(
    errors.flatMap((e) => {
      if (e.keyword !== 'additionalProperties') return [];
      const props = Object.keys((nodeAt(schemaFor(pointer, e.instancePath)).properties ?? {}) as object);
      const hint = closest((e.params as { additionalProperty: string }).additionalProperty, props);
      return hint ? [`${e.instancePath}\u0000${hint}`] : [];
    }),
  );
  for (const e of errors) {
    // Inside propertyNames Ajv reports the name's own failure (pattern) beside the propertyNames
    // error that explains it; the latter says it in words.
    if (e.propertyName !== undefined) continue;
    if (
      e.keyword === 'required' &&
      misspelt.has(`${e.instancePath}\u0000${String((e.params as { missingProperty: string }).missingProperty)}`)
    )
      continue;
    const rel =
      e.instancePath === ''
        ? []
        : e.instancePath
            .slice(1)
            .split('/')
            .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
    // Walk down the error's path; the first oneOf met takes over the explanation of that subtree.
    let p: string | undefined = pointer;
    let boundary: number | undefined;
    for (let i = 0; i < rel.length && p !== undefined; i += 1) {
      p = childPointer(deref(p), rel[i] as string);
      if (p !== undefined && Array.isArray(nodeAt(deref(p)).oneOf)) {
        boundary = i + 1;
        break;
      }
    }
    if (boundary !== undefined && p !== undefined) {
      const key = rel.slice(0, boundary).join('/');
      if (!boundaries.has(key)) {
        boundaries.add(key);
        const sub = rel.slice(0, boundary);
        out.push(...explain(source, p, valueAt(value, sub), toPath(path, sub, value)));
      }
      continue;
    }
    out.push(describe(source, e, toPath(path, rel, value), valueAt(value, rel), pointer));
  }
  return out;
}

function issue(source: GridSource, path: GridPath, message: string, key = false): UserInputError {
  return new UserInputError(message, {
    location: source.locate(path, { key }),
    field: formatPath(path),
    code: 'E_GRID_SCHEMA',
  });
}

function describe(
  source: GridSource,
  e: ErrorObject,
  path: (string | number)[],
  value: unknown,
  pointer: string,
): UserInputError {
  const params = e.params as Record<string, unknown>;
  const q = quoteValue(value);
  switch (e.keyword) {
    case 'additionalProperties': {
      const name = params.additionalProperty as string;
      const node = nodeAt(schemaFor(pointer, e.instancePath));
      const props = Object.keys((node.properties ?? {}) as object);
      const required = (node.required ?? []) as string[];
      const hint = closest(name, props);
      return issue(
        source,
        [...path, name],
        `unknown key ${JSON.stringify(name)}${hint ? ` (did you mean ${JSON.stringify(hint)}?${required.includes(hint) && !(hint in ((value as Record<string, unknown> | null) ?? {})) ? ' it is required' : ''})` : ''}; valid keys: ${props.join(', ')}`,
        true,
      );
    }
    case 'required':
      return issue(source, path, `missing required key ${JSON.stringify(params.missingProperty)}`);
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]).map((v) => JSON.stringify(v));
      const hint =
        typeof value === 'string' ? closest(value, (params.allowedValues as unknown[]).map(String)) : undefined;
      return issue(
        source,
        path,
        `${q} is not allowed${hint ? ` (did you mean ${JSON.stringify(hint)}?)` : ''}; use one of ${allowed.join(', ')}`,
      );
    }
    case 'const':
      return issue(source, path, `${q} is not allowed; use ${JSON.stringify(params.allowedValue)}`);
    case 'type':
      return issue(source, path, `${q} has the wrong type; expected ${String(params.type).replace(',', ' or ')}`);
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return issue(
        source,
        path,
        `${q} is out of range; it must be ${String(params.comparison)} ${String(params.limit)}`,
      );
    case 'minItems':
      return issue(
        source,
        path,
        Array.isArray(value) && value.length === 0
          ? `the list is empty; give at least ${String(params.limit)} value(s)`
          : `${q} needs at least ${String(params.limit)} items`,
      );
    case 'maxItems':
      return issue(source, path, `${q} has too many items; at most ${String(params.limit)}`);
    case 'uniqueItems':
      return issue(
        source,
        path,
        `${q} lists a value twice (items ${String(params.j)} and ${String(params.i)}); list each once`,
      );
    case 'minProperties':
      return issue(source, path, `the entry is empty; assign at least one axis`);
    case 'pattern':
      return issue(source, path, `${q} does not match ${String(params.pattern)}`);
    case 'minLength':
      return issue(source, path, `${q} is too short; at least ${String(params.limit)} characters`);
    case 'maxLength':
      return issue(source, path, `${q} is too long; at most ${String(params.limit)} characters`);
    case 'propertyNames':
      return issue(
        source,
        path,
        `key ${JSON.stringify(params.propertyName)} is not a valid name (letters, digits, _ . -)`,
      );
    default:
      return issue(source, path, `${q}: ${e.message ?? e.keyword}`);
  }
}

/** The schema pointer of the value at `instancePath` under `pointer` (no oneOf on the way). */
function schemaFor(pointer: string, instancePath: string): string {
  let p = deref(pointer);
  if (instancePath === '') return p;
  for (const s of instancePath.slice(1).split('/')) {
    const next = childPointer(p, s);
    if (next === undefined) return p;
    p = deref(next);
  }
  return p;
}
