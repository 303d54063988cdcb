// The fast tier's guard (`npm test`): a test file of that tier, or any Node process it starts
// (this module travels in NODE_OPTIONS), may not start redis-server, Python or a browser. Starting
// one throws, naming the program: mark the file `// tier: slow` (see test/tiers/tiers.ts).
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import { basename } from 'node:path';

export const FORBIDDEN =
  /^(redis-server|python(\d+(\.\d+)?)?|chrome|chromium(-browser)?|headless_shell|chrome-headless-shell)$/;

export class SlowTierProgram extends Error {
  constructor(program) {
    super(
      `the fast tier (npm test) may not start ${program}: mark the test file \`// tier: slow\` (it then runs in npm run test:all)`,
    );
    this.name = 'SlowTierProgram';
  }
}

/** The program a child_process call starts (for exec/execSync: the first word of the command). */
function programOf(name, file) {
  if (typeof file !== 'string') return '';
  const word = name === 'exec' || name === 'execSync' ? (file.trim().split(/\s+/)[0] ?? '') : file;
  return basename(word);
}

if (!globalThis.__canaryFastTierGuard) {
  globalThis.__canaryFastTierGuard = true;
  for (const name of ['spawn', 'spawnSync', 'execFile', 'execFileSync', 'exec', 'execSync']) {
    const original = childProcess[name];
    childProcess[name] = function guarded(file, ...rest) {
      const program = programOf(name, file);
      if (FORBIDDEN.test(program)) throw new SlowTierProgram(program);
      return original.call(this, file, ...rest);
    };
  }
  syncBuiltinESMExports();
}
