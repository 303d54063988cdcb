import { shellWord } from '../app/index.js';
import type { RedisTarget } from '../queue/index.js';

/**
 * The Redis flags of a follow-up command that `run` or `submit` prints, runnable as printed: never
 * the masked `***` of the URL (which fails with a wrong password), never the password itself.
 * Nothing when $REDIS_URL names the Redis (the next command finds it the same way); the password
 * goes by the file or variable it came from. A password given inside --redis cannot be repeated:
 * the URL is printed without it, and that command's warning already says to use $REDIS_PASSWORD or
 * --redis-password-file instead.
 */
export function redisHintArgs(
  target: RedisTarget | undefined,
  passwordFile: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (!target || env.REDIS_URL !== undefined) return '';
  if (target.options.password === undefined) return ` --redis ${shellWord(target.redacted)}`;
  const url = withoutPassword(target.redacted);
  return passwordFile !== undefined
    ? ` --redis ${shellWord(url)} --redis-password-file ${shellWord(passwordFile)}`
    : ` --redis ${shellWord(url)}`;
}

/** A masked URL (maskRedisUrl) with its masked password taken out: `redis://:***@h:1/0` → `redis://h:1/0`. */
export function withoutPassword(masked: string): string {
  return masked
    .replace(/\/\/([^/@]*?):\*\*\*@/, (_m, user: string) => (user ? `//${user}@` : '//'))
    .replace(/\/\/\*\*\*@/, '//')
    .replace(/([?&;])password=\*\*\*(&?)/i, (_m, sep: string, amp: string) => (amp ? sep : ''))
    .replace(/[?&;]$/, '');
}
