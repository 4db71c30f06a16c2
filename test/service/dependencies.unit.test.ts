import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';

// package.json `overrides` pins light-my-request's `cookie` to 1.x: cookie 2 declares Node 22 and
// made `npm install` warn on Node 20. light-my-request (Fastify's inject) only calls
// `stringifySetCookie({ name, value })`, which cookie 1.1 has with the same behaviour.
describe('dependency overrides', () => {
  it("Fastify's inject sends cookies with the pinned cookie package", async () => {
    const app = Fastify();
    app.get('/', async (request) => ({ cookie: request.headers.cookie ?? null }));
    const response = await app.inject({ method: 'GET', url: '/', cookies: { session: 'a b', theme: 'dark' } });
    expect(response.json()).toEqual({ cookie: 'session=a%20b; theme=dark' });
    await app.close();
  });
});
