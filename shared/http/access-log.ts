import { LogController, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';

/**
 * One log line a request, written when its response has been sent (docs/operations.md "Logs"):
 * the request (method, URL, host, remote address), the response's status and the response time,
 * under the request id. Fastify's default writes two (`incoming request`, then `request
 * completed`); at the default level (`info`) one line instead of two gives a read by id 9 % more
 * a second (docs/benchmarks.md), and loses nothing the two said. A request that fails is logged
 * as Fastify logs it.
 */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) super.requestCompleted(error, request, reply);
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** The logging options of every listener (the public ones and ops). */
export const accessLogOptions: Pick<FastifyServerOptions, 'logController'> = { logController: new OneLinePerRequest() };
