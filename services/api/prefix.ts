/** Where the public API lives on its listener. */
export const API_PREFIX = '/api/v1';
