/**
 * What a listener of the request pipeline reports about the requests it answers. The pipeline
 * knows nothing of metrics: `services/ops/metrics.ts` turns these calls into Prometheus series.
 */
export interface HttpObserver {
  /**
   * Once per response. `route` is the pattern of the route that matched
   * (`/api/v1/assets/:asset_id`), never the raw URL; null when no route matched (a 404).
   */
  responded(method: string, route: string | null, status: number, seconds: number): void;
  /** A request the rate limiter refused (answered 429). */
  rateLimited(): void;
}
