import { describe, expect, it } from 'vitest';
import type { ErrorEvent } from '../../src/contracts/progress.js';
import { classifyExit, type ExitFacts } from '../../src/runner/exit-status.js';

const facts = (over: Partial<ExitFacts>): ExitFacts => ({
  exitCode: 0,
  signal: null,
  stopRequested: false,
  lastError: null,
  sawDone: true,
  stderrTail: '',
  ...over,
});
const error = (kind: ErrorEvent['kind'], recoverable: boolean, message = 'boom'): ErrorEvent => ({
  v: 1,
  event: 'error',
  t: 0,
  kind,
  message,
  recoverable,
});

describe('classifyExit', () => {
  it.each([
    [facts({}), 'ok', 'ok'],
    [facts({ sawDone: false }), 'retry', 'protocol'],
    [facts({ exitCode: 1, lastError: error('internal', true) }), 'retry', 'internal'],
    [facts({ exitCode: 2, lastError: error('bad_manifest', false) }), 'final', 'bad_manifest'],
    [facts({ exitCode: 2 }), 'final', 'bad_input'],
    [facts({ exitCode: 3 }), 'final', 'diverged'],
    [facts({ exitCode: 4 }), 'final', 'missing_model'],
    [facts({ exitCode: 5, lastError: error('oom', false) }), 'final', 'oom'],
    [facts({ exitCode: 75, lastError: error('interrupted', true) }), 'interrupted', 'interrupted'],
    [facts({ exitCode: null, signal: 'SIGKILL', stopRequested: true }), 'interrupted', 'interrupted'],
    [facts({ exitCode: null, signal: 'SIGKILL' }), 'retry', 'killed'],
    [facts({ exitCode: 6, lastError: error('internal', true) }), 'busy', 'folder_busy'],
    [facts({ exitCode: 127 }), 'final', 'bad_image'],
    [facts({ exitCode: 9, lastError: error('bad_rows', false) }), 'final', 'bad_rows'],
    [facts({ exitCode: 9 }), 'retry', 'crash'],
    [facts({ exitCode: null, spawnError: 'cannot start /nope' }), 'final', 'missing_dependency'],
  ])('%o -> %s/%s', (input, outcome, kind) => {
    const status = classifyExit(input);
    expect(status.outcome).toBe(outcome);
    expect(status.kind).toBe(kind);
  });

  it('explains with the error event, else the stderr tail, else the code', () => {
    expect(
      classifyExit(facts({ exitCode: 1, lastError: error('internal', true, 'CUDA error: device lost') })).message,
    ).toBe('CUDA error: device lost');
    expect(classifyExit(facts({ exitCode: 1, stderrTail: 'Traceback ... | KeyError: x' })).message).toBe(
      'Traceback ... | KeyError: x',
    );
    expect(classifyExit(facts({ exitCode: 1 })).message).toBe('trainer exit 1');
  });

  it('names the signal of a killed trainer first, its last output after', () => {
    const message = classifyExit(facts({ exitCode: null, signal: 'SIGKILL', stderrTail: 'step 40' })).message;
    expect(message).toBe('trainer killed by SIGKILL (out of host memory?); last output: step 40');
  });
});
