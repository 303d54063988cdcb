/**
 * What `--json` prints. Every command's JSON output carries a `schema_version` and is described by
 * a schema in `schemas/` (`<command>-output.schema.json`); the CLI tests validate the real printed
 * output against it. A change of shape is a new version.
 */
export const OUTPUT_VERSIONS = {
  plan: 'canary-audit.plan-output/1',
  status: 'canary-audit.status-output/1',
  submit: 'canary-audit.submit-output/1',
  run: 'canary-audit.run-output/1',
  report: 'canary-audit.report-output/1',
  cancel: 'canary-audit.cancel-output/1',
  fleet: 'canary-audit.fleet-output/1',
} as const;

export type OutputKind = keyof typeof OUTPUT_VERSIONS;

/** The object printed: `schema_version` first, then the command's fields. */
export function versioned<T extends object>(kind: OutputKind, body: T): { schema_version: string } & T {
  return { schema_version: OUTPUT_VERSIONS[kind], ...body };
}

/** One JSON document on one line (NDJSON-friendly), newline-terminated. */
export function jsonLine(kind: OutputKind, body: object): string {
  return `${JSON.stringify(versioned(kind, body))}\n`;
}
