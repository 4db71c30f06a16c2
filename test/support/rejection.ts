import { expect } from 'vitest';

/** The error a promise rejects with (fails the test when it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection, but the promise resolved');
}

/** The Error a promise rejects with (fails the test when it resolves, or rejects with anything else). */
export async function refusal(promise: Promise<unknown>): Promise<Error> {
  const error = await rejectionOf(promise);
  expect(error).toBeInstanceOf(Error);
  return error as Error;
}
