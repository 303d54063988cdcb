/**
 * Whether a process with this pid exists on this host: signal 0 probes without signalling. EPERM
 * means it exists but belongs to another user, so it counts as alive.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
