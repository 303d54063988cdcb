import { pino, type Logger } from 'pino';

/**
 * The process logger: NDJSON on stderr (stdout is reserved for command output and `--json`),
 * pretty-printed when stderr is a terminal. Level from CANARY_AUDIT_LOG_LEVEL (default `info`).
 */
function createLogger(): Logger {
  const level = process.env.CANARY_AUDIT_LOG_LEVEL ?? 'info';
  if (process.stderr.isTTY && process.env.CANARY_AUDIT_LOG_FORMAT !== 'json') {
    return pino({
      level,
      transport: {
        target: 'pino-pretty',
        options: { destination: 2, colorize: true, translateTime: 'HH:MM:ss', ignore: 'pid,hostname' },
      },
    });
  }
  return pino({ level }, pino.destination({ dest: 2, sync: true }));
}

export const log: Logger = createLogger();
