import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, hostname } from 'node:os';
import { join } from 'node:path';
import { findOnPath } from '../../../src/queue/embedded-redis.js';

/**
 * A real single-node Slurm for tests: munged, slurmctld and slurmd (Debian's slurm-wlm and munge,
 * installed by `bash .ci/setup test`) on this host, with their own key, socket, ports, state and
 * logs in a temporary folder, so nothing of the host's own Slurm (if any) is touched. Client
 * commands find it through SLURM_CONF. `start` returns null and the reason when it cannot start
 * (binaries missing, not root, a daemon that does not come up); `stop` cancels what is left of the
 * test's jobs and stops the daemons.
 */
export interface TestCluster {
  dir: string;
  conf: string;
  node: string;
  /** Environment for client commands (sbatch, squeue, scancel, scontrol). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

const BINARIES = ['munged', 'slurmctld', 'slurmd', 'sbatch', 'squeue', 'scancel', 'scontrol', 'srun'];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function readPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function tail(file: string, lines = 3): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join(' | ');
  } catch {
    return '(no log)';
  }
}

export async function startTestCluster(dir: string): Promise<{ cluster: TestCluster } | { skip: string }> {
  const missing = BINARIES.filter((b) => !findOnPath(b) && !existsSync(join('/usr/sbin', b)));
  if (missing.length > 0)
    return {
      skip: `Slurm is not installed (${missing.join(', ')} missing; \`bash .ci/setup test\` installs slurm-wlm and munge)`,
    };
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return { skip: 'slurmd needs root to start jobs as their user; run the Slurm tests as root' };
  mkdirSync(join(dir, 'state'), { recursive: true });
  mkdirSync(join(dir, 'spool'), { recursive: true });
  const key = join(dir, 'munge.key');
  writeFileSync(key, randomBytes(1024), { mode: 0o600 });
  const socket = join(dir, 'munge.sock');
  const node = hostname().split('.')[0] as string;
  const [ctldPort, dPort] = [await freePort(), await freePort()];
  const conf = join(dir, 'slurm.conf');
  writeFileSync(
    conf,
    `ClusterName=canarytest
SlurmctldHost=${node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${ctldPort}
SlurmdPort=${dPort}
AuthType=auth/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s;
# 5 is the least Slurm takes).
AuthInfo=socket=${socket},cred_expire=5
CredType=cred/munge
StateSaveLocation=${join(dir, 'state')}
SlurmdSpoolDir=${join(dir, 'spool')}
SlurmctldPidFile=${join(dir, 'slurmctld.pid')}
SlurmdPidFile=${join(dir, 'slurmd.pid')}
SlurmctldLogFile=${join(dir, 'slurmctld.log')}
SlurmdLogFile=${join(dir, 'slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=30
SlurmdParameters=config_overrides
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${Math.max(2, availableParallelism())} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`,
  );
  const env = { SLURM_CONF: conf };
  const daemons = [join(dir, 'slurmd.pid'), join(dir, 'slurmctld.pid'), join(dir, 'munged.pid')];
  const jobs = new Set<string>();
  const stop = async () => {
    // Our jobs only: this cluster runs nothing else.
    try {
      const ids = execFileSync('squeue', ['-h', '-o', '%A'], {
        env: { ...process.env, ...env },
        encoding: 'utf8',
        timeout: 10_000,
      })
        .trim()
        .split('\n')
        .filter(Boolean);
      for (const id of ids) jobs.add(id);
      if (jobs.size > 0)
        execFileSync('scancel', [...jobs], { env: { ...process.env, ...env }, stdio: 'ignore', timeout: 10_000 });
      for (let i = 0; i < 60; i += 1) {
        const left = execFileSync('squeue', ['-h', '-o', '%A'], {
          env: { ...process.env, ...env },
          encoding: 'utf8',
          timeout: 10_000,
        }).trim();
        if (left === '') break;
        await sleep(500);
      }
    } catch {
      // the controller is already gone
    }
    for (const file of daemons) {
      const pid = readPid(file);
      if (pid === null) continue;
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        continue;
      }
      for (let i = 0; i < 40; i += 1) {
        try {
          process.kill(pid, 0);
        } catch {
          break;
        }
        await sleep(250);
      }
    }
  };
  const run = (file: string, args: string[]) =>
    execFileSync(file, args, { env: { ...process.env, ...env }, stdio: 'ignore', timeout: 30_000 });
  try {
    run('munged', [
      '-f',
      `--socket=${socket}`,
      `--key-file=${key}`,
      `--pid-file=${daemons[2]}`,
      `--log-file=${join(dir, 'munged.log')}`,
      `--seed-file=${join(dir, 'munged.seed')}`,
    ]);
  } catch {
    await stop();
    return { skip: `munged did not start: ${tail(join(dir, 'munged.log'))}` };
  }
  try {
    run('slurmctld', ['-c', '-f', conf]);
    run('slurmd', ['-f', conf]);
  } catch {
    await stop();
    return {
      skip: `slurmctld/slurmd did not start: ${tail(join(dir, 'slurmctld.log'))} ${tail(join(dir, 'slurmd.log'))}`,
    };
  }
  // Up when the controller answers a ping and the node has registered idle (polled, never a fixed wait).
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
    try {
      execFileSync('scontrol', ['ping'], { env: { ...process.env, ...env }, stdio: 'ignore', timeout: 10_000 });
      const state = execFileSync('sinfo', ['-h', '-N', '-o', '%T'], {
        env: { ...process.env, ...env },
        encoding: 'utf8',
        timeout: 10_000,
      }).trim();
      if (state === 'idle') return { cluster: { dir, conf, node, env, stop } };
    } catch {
      // not up yet
    }
    await sleep(200);
  }
  const why = `the node did not become idle within 30 s (scontrol ping, sinfo): ${tail(join(dir, 'slurmctld.log'))} ${tail(join(dir, 'slurmd.log'))}`;
  await stop();
  return { skip: why };
}

/** `scontrol show job ID` as key=value pairs (of the first job it lists). */
export function showJob(id: string, env: Record<string, string>): Record<string, string> {
  const text = execFileSync('scontrol', ['show', 'job', '-o', id], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 10_000,
  });
  const first = text.trim().split('\n')[0] ?? '';
  return Object.fromEntries(
    first.split(/\s+/).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}
