// tier: slow (redis-server)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AddressInfo, type Server, type Socket, createServer, connect } from 'node:net';
import { withSocketTimeout } from '../../src/queue/connection.js';
import { type EmbeddedRedis, openRedis, queueConnection } from '../../src/queue/index.js';
import { removeDir, tempDir } from './helpers/fixtures.js';
import { startTestRedis } from './helpers/redis.js';

/**
 * A TCP proxy in front of Redis that models a partition as the worker hosts saw it: while cut, no
 * byte crosses any connection (old or new); after the heal, connections that existed during the cut
 * stay silent (as a socket in the kernel's retransmission backoff does for up to 2 minutes), and only
 * connections opened after the heal carry bytes.
 */
interface BlackHoleProxy {
  port: number;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

async function blackHoleProxy(target: number): Promise<BlackHoleProxy> {
  let cut = false;
  const pairs: { client: Socket; upstream: Socket; dead: boolean }[] = [];
  const server: Server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    const pair = { client, upstream, dead: cut };
    pairs.push(pair);
    client.on('data', (chunk) => {
      if (!pair.dead) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!pair.dead) client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      cut = true;
      for (const pair of pairs) pair.dead = true;
    },
    heal() {
      cut = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of pairs) {
          pair.client.destroy();
          pair.upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}

const root = tempDir('socket-timeout');
let redis: EmbeddedRedis;
beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

const SOCKET_TIMEOUT_MS = 500;
/** socketTimeout, plus ioredis's reconnect delay (50 ms per attempt so far) and a loaded machine's slack. */
const BOUND_MS = 3_000;

/** After a 1.5 s cut with a command in flight, ms from the heal until a PING answers, or null past BOUND_MS. */
async function recoveryAfterCut(socketTimeoutMs: number | undefined): Promise<number | null> {
  const proxy = await blackHoleProxy(redis.port);
  const base = queueConnection({
    options: { ...redis.options, host: '127.0.0.1', port: proxy.port },
    redacted: 'proxy',
  });
  const client = openRedis(socketTimeoutMs === undefined ? base : withSocketTimeout(base, socketTimeoutMs), true);
  try {
    expect(await client.ping()).toBe('PONG');
    proxy.cut();
    // In flight when the link goes: BullMQ's lock renewals and hand-backs are such commands.
    const inFlight = client.set('socket-timeout:in-flight', '1').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1_500));
    proxy.heal();
    const healed = Date.now();
    const answered = await Promise.race([
      client.ping().then(() => Date.now() - healed),
      new Promise<null>((r) => setTimeout(() => r(null), BOUND_MS)),
    ]);
    void inFlight;
    return answered;
  } finally {
    client.disconnect();
    await proxy.close();
  }
}

describe('a worker connection whose peer stops answering', () => {
  it('with socketTimeout, reconnects on a fresh socket and answers within the bound after the heal', async () => {
    const ms = await recoveryAfterCut(SOCKET_TIMEOUT_MS);
    expect(ms).not.toBeNull();
    expect(ms as number).toBeLessThan(BOUND_MS);
  });

  it('without it, stays on the silent socket past the bound (the failure the timeout fixes)', async () => {
    expect(await recoveryAfterCut(undefined)).toBeNull();
  });
});
