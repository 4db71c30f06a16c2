import { afterAll, afterEach } from 'vitest';
import { assertNoFailures, installGuard } from './openapi-guard.js';

// vitest `setupFiles`: in every test file, responses of the services that startTestService starts
// are checked against their published OpenAPI document (openapi-guard.ts). A mismatch fails the
// test that received it; one received in a beforeAll or afterAll fails the file.
installGuard();
afterEach(() => assertNoFailures());
afterAll(() => assertNoFailures());
