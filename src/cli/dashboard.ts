import { existsSync } from 'node:fs';
import { startDashboard } from '../dashboard/index.js';
import { resolve } from 'node:path';
import {
  assertRedisReachable,
  privateRedisTarget,
  queueConnection,
  redisTargetFrom,
  requireRedisTarget,
} from '../queue/index.js';
import { ARTIFACTS_OPTION, REDIS_OPTION, artifactsFrom } from './queue-options.js';
import { UserInputError, quoteValue } from '../errors.js';
import { intOption, stringOption, type Command } from './command.js';

/**
 * `canary-audit dashboard`: a live web page over the queue (audits, runs, the fleet), read-only and
 * on localhost unless told otherwise.
 */
export const command: Command = {
  name: 'dashboard',
  summary: 'Serve a live web dashboard of audits, runs and GPU workers (read-only by default).',
  usage: '[--redis URL] [--host 127.0.0.1] [--allow-host NAME ...] [--port N] [--artifacts DIR] [--allow-actions]',
  description: `
Audits with progress, failures and ETA; one audit's runs with the varying axes as columns, state,
loss sparkline, rows/s, phase, attempt, host and GPU, a failed run's error and trainer log, and the
exposure-vs-dose plot as runs finish; the fleet of workers (idle, busy, lost) with their GPUs and
throughput per host. One Redis poller per server feeds every open page (server-sent events).
Bound to 127.0.0.1 and read-only by default. On any address, requests must name this machine by a
loopback name (localhost, 127.0.0.1, ::1), the address given to --host, or a name given with
--allow-host (repeatable): a DNS-rebinding page cannot reach the queue. Behind a port mapping or a
proxy, give the name users type (e.g. --host 0.0.0.0 --allow-host dash.internal). --allow-actions adds cancel-audit and retry-run buttons,
guarded by a random token printed with the URL (open that URL) and refused to cross-site requests.
Exit codes: 0 stopped on a signal, 1 Redis unreachable or the port in use, 2 bad flags.`,
  options: {
    ...REDIS_OPTION,
    ...ARTIFACTS_OPTION,
    host: {
      type: 'string',
      value: 'ADDR',
      description: 'Address to listen on. Default 127.0.0.1 (this machine only).',
    },
    'allow-host': {
      type: 'string',
      value: 'NAME',
      multiple: true,
      description:
        'A host name requests may use besides loopback (repeatable): how the page is reached through --host 0.0.0.0.',
    },
    port: { type: 'string', value: 'N', description: 'Port to listen on (0: any free port). Default 8790.' },
    interval: {
      type: 'string',
      value: 'MS',
      description: 'How often the one Redis poller reads, in ms. Default 1000.',
    },
    'allow-actions': { type: 'boolean', description: 'Enable cancel-audit and retry-run (need the printed token).' },
    audit: {
      type: 'string',
      value: 'DIR',
      multiple: true,
      description:
        'Show this audit folder too (repeatable). Without --redis/REDIS_URL, the Redis is the one `canary-audit run` started for it (DIR/redis); when that Redis is gone, the audit is shown from its files.',
    },
  },
  positionals: [0, 0],
  async run(args) {
    const allowHosts = allowHostsFrom(args.values['allow-host']);
    const port = intOption(args, 'port', 8790, 0);
    if (port > 65535)
      throw new UserInputError(`must be 0..65535 (0: any free port), got ${port}`, {
        field: '--port',
        code: 'E_BAD_FLAG',
      });
    const auditDirs = ((args.values.audit as string[] | undefined) ?? []).map((d) => resolve(d));
    for (const dir of auditDirs) {
      if (!existsSync(`${dir}/audit.json`))
        throw new UserInputError(`${dir} holds no audit.json; pass an audit folder (artifacts/audits/<audit-id>)`, {
          field: '--audit',
          code: 'E_NO_AUDIT',
        });
    }
    const own =
      auditDirs.length > 0 && !redisTargetFrom(stringOption(args, 'redis'))
        ? privateRedisTarget(`${auditDirs[0]}/redis`)
        : null;
    const target =
      own ?? requireRedisTarget(stringOption(args, 'redis'), 'dashboard', stringOption(args, 'redis-password-file'));
    let reachable = true;
    try {
      await assertRedisReachable(target, 2_000);
    } catch (error) {
      // Audits named by folder are shown from their files; without any, there is nothing to show.
      if (auditDirs.length === 0) throw error;
      reachable = false;
    }
    const artifactsDir = artifactsFrom(args);
    const dashboard = await startDashboard({
      conn: queueConnection(target),
      artifactsDir: existsSync(artifactsDir) ? artifactsDir : null,
      host: stringOption(args, 'host') ?? '127.0.0.1',
      allowHosts,
      port,
      auditDirs,
      privateRedisOf: own ? (auditDirs[0] ?? null) : null,
      intervalMs: intOption(args, 'interval', 1000, 200),
      allowActions: Boolean(args.values['allow-actions']),
      ...(process.env.CANARY_AUDIT_DASHBOARD_TOKEN ? { token: process.env.CANARY_AUDIT_DASHBOARD_TOKEN } : {}),
    });
    const host = stringOption(args, 'host') ?? '127.0.0.1';
    if (!['127.0.0.1', 'localhost', '::1'].includes(host)) {
      process.stderr.write(`canary-audit dashboard: ${exposureWarning(host, allowHosts, Boolean(dashboard.token))}\n`);
    }
    process.stderr.write(
      `canary-audit dashboard: ${dashboard.actionUrl ?? dashboard.url} (${dashboard.token ? 'actions enabled: keep this URL private' : 'read-only'}; ${target.redacted}${reachable ? '' : ': queue unreachable, showing the audit from its files'})\n`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
    await dashboard.close();
    return 0;
  },
};

function allowHostsFrom(value: unknown): string[] {
  const names = (Array.isArray(value) ? value : value === undefined ? [] : [value]).map(String);
  for (const name of names) {
    if (!/^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$/.test(name)) {
      throw new UserInputError(
        `--allow-host ${quoteValue(name)} is not a host name or address; e.g. --allow-host dash.internal`,
        { field: '--allow-host', code: 'E_BAD_FLAG' },
      );
    }
  }
  return names;
}

/** What a non-loopback bind exposes, and to whom, in one line. */
export function exposureWarning(host: string, allowHosts: string[], actions: boolean): string {
  const names = ['localhost', ...(['0.0.0.0', '::'].includes(host) ? [] : [host]), ...allowHosts];
  return (
    `listening on ${host}${['0.0.0.0', '::'].includes(host) ? ' (every interface)' : ''}: anyone who reaches it sees every audit and run, ` +
    `their failures and trainer logs, and the GPU fleet, over plain HTTP${actions ? ', and with the printed token can cancel audits and retry runs' : ''}; ` +
    `requests must name ${names.join(', ')} (more with --allow-host NAME)`
  );
}
