import pg from 'pg';
import type { Logger } from '../logger.js';

export interface DatabaseHealth {
  healthy: boolean;
  /** Seconds since the database last answered, while it does not. */
  unreachableSeconds: number;
}

/**
 * Watches whether the database answers, on a connection of its own (a pool busy with requests is
 * not an outage). An outage is logged when it starts (warn), when it has lasted
 * `unhealthyAfterMs` (error: /healthz then answers 503, so a supervisor restarts the process), and
 * when it ends (info). A probe runs every fifth of the bound (at most every 5 s).
 */
export class DatabaseWatch {
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | null = null;
  private probing: Promise<void> | null = null;
  private stopped = false;
  private lastAnsweredAt = Date.now();
  private failing = false;
  private reportedUnhealthy = false;
  private readonly intervalMs: number;

  constructor(
    private readonly url: string,
    private readonly log: Logger,
    private readonly unhealthyAfterMs: number,
  ) {
    this.intervalMs = Math.min(5000, Math.max(100, unhealthyAfterMs / 5));
  }

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.probing;
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }

  /** Decided by the probes, so /healthz turns 503 exactly when the error line is logged. */
  health(): DatabaseHealth {
    return { healthy: !this.reportedUnhealthy, unreachableSeconds: this.failing ? (Date.now() - this.lastAnsweredAt) / 1000 : 0 };
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.probing = this.probe().finally(() => {
        this.probing = null;
        this.schedule();
      });
    }, this.intervalMs);
    this.timer.unref();
  }

  private async probe(): Promise<void> {
    const timeoutMs = Math.max(1000, this.intervalMs);
    try {
      if (!this.client) {
        const client = new pg.Client({
          connectionString: this.url,
          connectionTimeoutMillis: timeoutMs,
          query_timeout: timeoutMs,
          application_name: 'tracking-health',
        });
        client.on('error', () => undefined);
        this.client = client;
        await client.connect();
      }
      await this.client.query('SELECT 1');
      this.answered();
    } catch (error) {
      const broken = this.client;
      this.client = null;
      void broken?.end().catch(() => undefined);
      if (!this.stopped) this.unanswered(error);
    }
  }

  private answered(): void {
    if (this.failing) {
      this.log.info({ outageSeconds: Math.round((Date.now() - this.lastAnsweredAt) / 1000) }, 'database reachable again');
    }
    this.lastAnsweredAt = Date.now();
    this.failing = false;
    this.reportedUnhealthy = false;
  }

  private unanswered(error: unknown): void {
    const reason = error instanceof Error ? error.message : String(error);
    if (!this.failing) this.log.warn({ reason }, 'database unreachable');
    this.failing = true;
    const unreachableSeconds = (Date.now() - this.lastAnsweredAt) / 1000;
    if (unreachableSeconds * 1000 >= this.unhealthyAfterMs && !this.reportedUnhealthy) {
      this.reportedUnhealthy = true;
      this.log.error(
        { reason, unreachableSeconds: Math.round(unreachableSeconds) },
        `database unreachable for ${Math.round(unreachableSeconds)} s: /healthz answers 503 until it is back; restart the process if it stays away`,
      );
    }
  }
}
