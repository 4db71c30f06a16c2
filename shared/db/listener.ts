import pg from 'pg';

/**
 * One connection that LISTENs on some channels, and gets them back when it is lost: a new
 * connection is tried every `retryMs` until one listens again or `stop` is called. Notifications
 * sent while no connection listened are lost, so `onListening` says whether this is a reconnect:
 * its owner then reads again whatever the notifications would have told it. Used by the event
 * store (appends), the checkpoint watcher (projection checkpoints) and the authenticator (key
 * revocations and signing-key rotations).
 */
export interface NotificationListenerOptions {
  connectionString: string;
  channels: readonly string[];
  /**
   * Each notification. One it throws on (a payload it cannot read) is dropped and told to
   * `onUnreadable`: an error thrown inside pg's notification handler would otherwise leave the
   * connection's parser stuck on that message, and every later notification would be lost.
   */
  onNotification(message: pg.Notification): void;
  onUnreadable?(message: pg.Notification, error: unknown): void;
  /** Each time a connection listens; `reconnected` is false the first time. Awaited before start resolves. */
  onListening?(reconnected: boolean): void | Promise<void>;
  /** The connection was lost (a new one is on its way). */
  onLost?(error: Error): void;
  retryMs?: number;
}

export class NotificationListener {
  private client: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private everListened = false;
  private stopped = false;

  constructor(private readonly options: NotificationListenerOptions) {}

  /** Connects and listens. Rejects when this first connection fails, and then tries no more. */
  start(): Promise<void> {
    return this.connect();
  }

  /**
   * For an owner that can do without for a while (it polls as well): resolves after the first
   * attempt, and a failed one is retried like a lost connection.
   */
  startInBackground(): Promise<void> {
    return this.connect().catch(() => this.retryLater());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.options.connectionString, keepAlive: true });
    client.on('notification', (message) => {
      try {
        this.options.onNotification(message);
      } catch (error) {
        this.options.onUnreadable?.(message, error);
      }
    });
    client.on('error', (error) => {
      client.end().catch(() => undefined);
      if (this.client !== client) return;
      this.client = null;
      this.options.onLost?.(error);
      this.retryLater();
    });
    try {
      await client.connect();
      for (const channel of this.options.channels) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.stopped) {
      // Stopped while connecting: do not leave a connection behind.
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    const reconnected = this.everListened;
    this.everListened = true;
    await this.options.onListening?.(reconnected);
  }

  private retryLater(): void {
    if (this.stopped || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect().catch(() => this.retryLater());
    }, this.options.retryMs ?? 500);
    this.retryTimer.unref();
  }
}
