import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';

/**
 * Hosts of their own for a test, on this machine: network namespaces joined by veth pairs to a
 * bridge in the root namespace (iproute2, as root). The root namespace is the database host
 * (Postgres and the Kafka broker of the run listen on its loopback): `expose` forwards a port of
 * its loopback to the bridge's address, where the other hosts reach it.
 */

/** Why namespaces cannot be made here, or null. */
export function netnsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  const ip = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  if (ip.error || ip.status !== 0) return `no usable ip (iproute2): ${ip.error?.message ?? ip.stderr}`;
  return null;
}

function ip(...args: string[]): void {
  const result = spawnSync('ip', args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`ip ${args.join(' ')}: ${result.stderr || result.error?.message}`);
}

export interface Host {
  name: string;
  /** The namespace. */
  ns: string;
  /** Its address on the bridge. */
  address: string;
  /** The veth end in the root namespace: down cuts the host off. */
  link: string;
}

export class Network {
  readonly id = randomBytes(3).toString('hex');
  readonly subnet = `10.${200 + (randomBytes(1)[0]! % 50)}.${randomBytes(1)[0]! % 250}`;
  readonly gateway = `${this.subnet}.1`;
  private readonly bridge = `br${this.id}`;
  readonly hosts: Host[] = [];
  private readonly servers: net.Server[] = [];
  private readonly sockets = new Set<net.Socket>();

  constructor() {
    ip('link', 'add', this.bridge, 'type', 'bridge');
    ip('addr', 'add', `${this.gateway}/24`, 'dev', this.bridge);
    ip('link', 'set', this.bridge, 'up');
  }

  /** A host: its namespace, a veth pair to the bridge, an address, loopback up, the bridge as its route out. */
  addHost(name: string): Host {
    const n = this.hosts.length + 10;
    const host: Host = { name, ns: `h${this.id}${name}`, address: `${this.subnet}.${n}`, link: `v${this.id}${n}` };
    ip('netns', 'add', host.ns);
    this.hosts.push(host);
    ip('link', 'add', host.link, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', host.ns);
    ip('link', 'set', host.link, 'master', this.bridge);
    ip('link', 'set', host.link, 'up');
    ip('-n', host.ns, 'addr', 'add', `${host.address}/24`, 'dev', 'eth0');
    ip('-n', host.ns, 'link', 'set', 'eth0', 'up');
    ip('-n', host.ns, 'link', 'set', 'lo', 'up');
    ip('-n', host.ns, 'route', 'add', 'default', 'via', this.gateway);
    return host;
  }

  /** Cuts the host off (its link down), or brings it back. */
  setLink(host: Host, up: boolean): void {
    ip('link', 'set', host.link, up ? 'up' : 'down');
  }

  /** Forwards `gateway:<port>` (a new port) to `127.0.0.1:<target>` of the root namespace; the port. */
  async expose(target: number): Promise<number> {
    const server = net.createServer((socket) => {
      const upstream = net.connect(target, '127.0.0.1');
      for (const s of [socket, upstream]) {
        this.sockets.add(s);
        s.once('close', () => this.sockets.delete(s));
      }
      socket.pipe(upstream).pipe(socket);
      const close = () => {
        socket.destroy();
        upstream.destroy();
      };
      socket.on('error', close);
      upstream.on('error', close);
    });
    this.servers.push(server);
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, this.gateway, resolve));
    return (server.address() as net.AddressInfo).port;
  }

  /** Removes everything it made (namespaces take their veth pairs with them); never throws. */
  destroy(): void {
    for (const server of this.servers) server.close();
    for (const socket of this.sockets) socket.destroy();
    for (const host of this.hosts) spawnSync('ip', ['netns', 'del', host.ns]);
    spawnSync('ip', ['link', 'del', this.bridge]);
  }
}
