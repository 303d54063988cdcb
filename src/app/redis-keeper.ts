import { log } from '../log.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../queue/index.js';
import { pidAlive } from '../pid.js';

/**
 * `run`'s private redis-server, kept alive: if it dies while the audit runs (killed by hand, by the
 * OOM killer), it is started again on the same port, password and append-only file, and the workers
 * reconnect by themselves. Without this, `run` would wait forever for a Redis that is gone.
 */
export class EmbeddedRedisKeeper {
  private timer: NodeJS.Timeout | undefined;
  private restarting: Promise<void> | null = null;
  private stopped = false;

  private constructor(
    private current: EmbeddedRedis,
    everyMs: number,
  ) {
    this.timer = setInterval(() => void this.check(), everyMs);
    this.timer.unref();
  }

  static async start(dir: string, everyMs = 1_000): Promise<EmbeddedRedisKeeper> {
    return new EmbeddedRedisKeeper(await startEmbeddedRedis({ dir }), everyMs);
  }

  /** Connection settings: the same across restarts. */
  get server(): EmbeddedRedis {
    return this.current;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.restarting;
    await this.current.stop();
  }

  private check(): Promise<void> {
    if (this.stopped || this.restarting || pidAlive(this.current.pid)) return Promise.resolve();
    log.warn(
      { port: this.current.port },
      'the private redis-server exited; starting it again on the same port and append-only file',
    );
    this.restarting = startEmbeddedRedis({ dir: this.current.dir, port: this.current.port })
      .then((server) => {
        this.current = server;
      })
      .catch((error: unknown) => log.error({ err: error }, 'could not restart the private redis-server'))
      .finally(() => {
        this.restarting = null;
      });
    return this.restarting;
  }
}
