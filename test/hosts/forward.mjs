// A TCP forwarder run inside a host's network namespace (test/hosts/hosts.int.test.ts):
// node forward.mjs <listen host> <listen port> <target host> <target port>. Prints `listening`.
import net from 'node:net';

const [listenHost, listenPort, targetHost, targetPort] = process.argv.slice(2);
const server = net.createServer((socket) => {
  const upstream = net.connect(Number(targetPort), targetHost);
  socket.pipe(upstream).pipe(socket);
  const close = () => {
    socket.destroy();
    upstream.destroy();
  };
  socket.on('error', close);
  upstream.on('error', close);
});
server.listen(Number(listenPort), listenHost, () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
