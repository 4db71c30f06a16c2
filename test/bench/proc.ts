import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

/**
 * CPU accounting from /proc (Linux) for the benchmarks: what a process, or the Postgres server
 * with all its backends, has spent.
 */

/** Microseconds per clock tick of /proc's CPU times. */
export const TICK_US = 1_000_000 / (Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100);

/** Fields of /proc/<pid>/stat from the state on (index 0 = state, 1 = ppid, 11 = utime …). */
export function statFields(pid: number): string[] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The postmaster of the server a connection with this backend pid belongs to. */
export function postmasterOf(backendPid: number): number {
  return Number(statFields(backendPid)[1]);
}

/**
 * CPU time of the Postgres server, microseconds: the postmaster and every backend, including
 * backends that exited meanwhile (their utime and stime move to the postmaster's cutime, cstime).
 */
export function postgresCpuUs(postmaster: number): number {
  let ticks = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    let fields: string[];
    try {
      fields = statFields(pid);
    } catch {
      continue; // exited meanwhile
    }
    if (pid === postmaster || Number(fields[1]) === postmaster) {
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    }
  }
  return ticks * TICK_US;
}

/**
 * CPU time of this process's children that have ended and been waited for (cutime + cstime of
 * /proc/self), microseconds: the CPU of a child process run to its end, as the difference
 * around it.
 */
export function endedChildrenCpuUs(): number {
  const f = statFields(process.pid);
  return (Number(f[13]) + Number(f[14])) * TICK_US;
}
