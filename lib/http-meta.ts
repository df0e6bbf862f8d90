/**
 * What an action sets in ctx.meta to shape its HTTP response: moleculer-web reads these fields
 * when it answers a REST route (a bus caller never sees them).
 */
export type ResponseMeta = {
  $responseHeaders?: Record<string, string>;
  $statusCode?: number;
  $responseType?: string;
  /** Sent as the Location header with a 201 or a redirect only. */
  $location?: string;
};

/** Marks the response 201 Created with the new resource's address (moleculer-web sets Location). */
export function respondCreated(meta: ResponseMeta, location: string): void {
  meta.$statusCode = 201;
  meta.$location = location;
}
