import type { FastifyInstance } from 'fastify';
import { createAuthentication, type Authentication } from '../../shared/auth/index.js';
import { registerOpenApi } from '../../shared/http/openapi.js';
import { httpObserver } from '../ops/metrics.js';
import { listenerUrl, type RoleFactory } from '../role.js';
import { DOCS_PATH, registerDocs } from './docs.js';
import { API_PREFIX } from './prefix.js';
import { apiRoutes } from './routes.js';
import { appRoutes, loadCaller } from './app/routes.js';
import { behindTls, registerAppRoutes, type AppRoute } from './app/pipeline.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { operatorRoutes } from './app/operator-routes.js';
import { scanRoutes } from './app/scan-routes.js';
import { LiveReadsHub } from './app/live-reads.js';
import { startPeopleSweep } from './app/people-sweep.js';
import { checkSingleSignOnAtStart, registerSingleSignOn, signInOptionsRoute } from './app/single-sign-on.js';
import { registerConsole } from './console/serve.js';
import { buildApiServer } from './server.js';
import { startImportWorker } from '../imports/jobs.js';
import { onImportPosted } from '../imports/worker-signal.js';

/** Every endpoint of the web application's own (docs/web-app.md, "App endpoints"). */
export function allAppRoutes(ctx: ServiceContext, linkBase: () => string, liveReads: LiveReadsHub): AppRoute[] {
  return [...appRoutes(ctx, linkBase), ...operatorRoutes(ctx, liveReads), ...scanRoutes(ctx), signInOptionsRoute(ctx.config)];
}

/** The public API on HOST:PORT. */
export const apiRole: RoleFactory = (ctx) => {
  let auth: Authentication | null = null;
  let app: FastifyInstance | null = null;
  let live: LiveReadsHub | null = null;
  let sweep: { stop(): Promise<void> } | null = null;
  let imports: { stop(): Promise<void> } | null = null;
  return {
    name: 'api',
    async start() {
      await checkSingleSignOnAtStart(ctx);
      auth = await createAuthentication(ctx);
      const routes = apiRoutes(ctx);
      const liveReads = (live = new LiveReadsHub({ store: ctx.store, pool: ctx.pool, log: ctx.log.child({ role: 'api' }), databaseUrl: ctx.databaseUrl }));
      app = buildApiServer(ctx, {
        authenticator: auth.authenticator,
        rateLimiter: auth.rateLimiter,
        routes,
        registerPublic: (server) => {
          registerOpenApi(server, routes);
          registerDocs(server);
          // The web application's own endpoints (docs/web-app.md); links start with PUBLIC_URL, or this listener's address.
          const linkBase = () => ctx.config.PUBLIC_URL ?? listenerUrl(server, ctx.config.HOST);
          registerAppRoutes(server, allAppRoutes(ctx, linkBase, liveReads), { pool: ctx.pool, config: ctx.config, loadCaller: (session) => loadCaller(ctx, session) });
          // Single sign-on's two navigations (docs/web-app.md, "Single sign-on"), beside the app pipeline: they answer redirects and pages.
          registerSingleSignOn(server, ctx);
          // The pages people use (docs/console.md), at /, and its Not found page.
          return registerConsole(server, { behindTls: (request) => behindTls(request, ctx.config) });
        },
        observer: httpObserver('api'),
      });
      await app.listen({ host: ctx.config.HOST, port: ctx.config.PORT });
      sweep = startPeopleSweep(ctx, ctx.log.child({ role: 'api' }));
      // Imports run in the background of the api role (docs/design.md, "Imports").
      const worker = startImportWorker(ctx, ctx.log.child({ role: 'api' }));
      const unsubscribe = onImportPosted(worker.wake);
      imports = { stop: () => (unsubscribe(), worker.stop()) };
    },
    async stop() {
      // An import in flight stops after its current rows, its progress written; it resumes on the next start.
      await imports?.stop();
      // Live streams never end by themselves: end them, so the listener's close does not wait on them.
      await sweep?.stop();
      await live?.close();
      await app?.close();
      await auth?.stop();
    },
    urls: (): Record<string, string> => {
      if (!app) return {};
      const base = listenerUrl(app, ctx.config.HOST);
      return { console: `${base}/`, api: `${base}${API_PREFIX}`, docs: `${base}${DOCS_PATH}` };
    },
  };
};
