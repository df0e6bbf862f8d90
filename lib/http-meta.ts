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

/** Marks the response 202 Accepted (work goes on in the background) with the resource's address, which moleculer-web sends only with a 201 as $location. */
export function respondAccepted(meta: ResponseMeta, location: string): void {
  meta.$statusCode = 202;
  meta.$responseHeaders = { ...meta.$responseHeaders, Location: location };
}

/** Marks the response 201 Created with the new resource's address (moleculer-web sets Location). */
export function respondCreated(meta: ResponseMeta, location: string): void {
  meta.$statusCode = 201;
  meta.$location = location;
}
