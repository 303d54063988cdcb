import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auditsOnDisk } from '../../src/app/disk-audits.js';
import { AUDIT_VERSION } from '../../src/contracts/index.js';

const root = mkdtempSync(join(tmpdir(), 'ca-disk-audits-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function folder(name: string, text: string | null): string {
  const dir = join(root, 'audits', name);
  mkdirSync(dir, { recursive: true });
  if (text !== null) writeFileSync(join(dir, 'audit.json'), text);
  return dir;
}

describe('auditsOnDisk', () => {
  it("lists each audit's id, name and folder from audit.json, and skips folders that hold no readable audit", async () => {
    expect(await auditsOnDisk(root)).toEqual([]);
    // Only the head is read: a runs list the schema would refuse does not hide the audit from status.
    const a = folder(
      'audit-aaaaaaaaaaaa',
      JSON.stringify({ schema_version: AUDIT_VERSION, id: 'audit-aaaaaaaaaaaa', name: 'first', runs: [{}] }),
    );
    const b = folder(
      'audit-bbbbbbbbbbbb',
      JSON.stringify({ schema_version: AUDIT_VERSION, id: 'audit-bbbbbbbbbbbb', name: 'second', runs: [] }),
    );
    folder('audit-cccccccccccc', '{"schema_version": "canary-audit.audit/1", "id": ');
    folder(
      'audit-dddddddddddd',
      JSON.stringify({ schema_version: 'canary-audit.audit/0', id: 'audit-dddddddddddd', name: 'old' }),
    );
    folder('audit-eeeeeeeeeeee', JSON.stringify({ schema_version: AUDIT_VERSION, id: 7, name: 'bad id' }));
    folder('not-an-audit', null);
    expect(await auditsOnDisk(root)).toEqual([
      { auditId: 'audit-aaaaaaaaaaaa', name: 'first', dir: a },
      { auditId: 'audit-bbbbbbbbbbbb', name: 'second', dir: b },
    ]);
  });
});
