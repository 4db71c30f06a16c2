import net from 'node:net';

/**
 * A TCP proxy in front of a real Postgres that can hold the server's answers back on the
 * connections open at a given moment: a query sent through one of them runs (and commits) on the
 * server, but its caller gets the answer only on `release`. It puts the store's own reads and
 * NOTIFYs "in flight" for as long as a test needs, to order them against other appends.
 */
export interface HoldingProxy {
  /** `url` with the proxy's port. */
  url: string;
  /** Holds the answers on every connection open now (later connections pass freely); returns how many. */
  hold(): number;
  /** Forwards what was held and stops holding. */
  release(): void;
  close(): Promise<void>;
}

interface Connection {
  client: net.Socket;
  server: net.Socket;
  held: Buffer[] | null;
}

export async function startHoldingProxy(url: string): Promise<HoldingProxy> {
  const target = new URL(url);
  const connections = new Set<Connection>();
  const proxy = net.createServer((client) => {
    const server = net.connect(Number(target.port), target.hostname);
    const connection: Connection = { client, server, held: null };
    connections.add(connection);
    client.on('data', (chunk) => server.write(chunk));
    server.on('data', (chunk) => {
      if (connection.held) connection.held.push(chunk);
      else client.write(chunk);
    });
    const close = () => {
      connections.delete(connection);
      client.destroy();
      server.destroy();
    };
    client.on('error', close).on('close', close);
    server.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((proxy.address() as net.AddressInfo).port);
  return {
    url: proxied.toString(),
    hold() {
      for (const connection of connections) connection.held ??= [];
      return connections.size;
    },
    release() {
      for (const connection of connections) {
        const held = connection.held ?? [];
        connection.held = null;
        for (const chunk of held) connection.client.write(chunk);
      }
    },
    async close() {
      for (const connection of connections) {
        connection.client.destroy();
        connection.server.destroy();
      }
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}
