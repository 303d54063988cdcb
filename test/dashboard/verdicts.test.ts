import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDashboardApp } from '../../src/dashboard/server.js';
import type { StatusSource } from '../../src/dashboard/source.js';
import type { QueueConnection } from '../../src/queue/index.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

/** The audit page's plot route also answers the verdict of each declared comparison (no browser, no Redis). */
const root = tempDir('dashboard-verdicts');
afterAll(() => removeDir(root));

function source(auditDir: string): StatusSource {
  const parent = { id: 'audit-000000000001', data: { audit_dir: auditDir } };
  return {
    handles: {
      runs: { getJob: async () => undefined },
      audits: { getJob: async (id: string) => (id === parent.id ? parent : undefined) },
    },
    current: async () => ({ audits: [{ audit_id: parent.id, completed: 1 }] }),
    diskAuditDir: () => null,
  } as unknown as StatusSource;
}

describe('dashboard verdicts', () => {
  it('sends one verdict sentence per declared comparison with the plot', async () => {
    const artifacts = join(root, 'artifacts');
    const audit = await buildStudyAudit(join(artifacts, 'audits'));
    const res = await createDashboardApp(source(relative(artifacts, audit.auditDir)), {
      conn: {} as QueueConnection,
      artifactsDir: artifacts,
      actionToken: null,
    }).request('/api/audits/audit-000000000001/plot', { headers: { host: 'localhost' } });
    const body = (await res.json()) as { spec: unknown; verdicts: string[] };
    expect(body.spec).not.toBeNull();
    expect(body.verdicts.length).toBeGreaterThan(0);
    for (const v of body.verdicts) expect(v).toMatch(/ bits, (decided|undecided)/);
  });
});
