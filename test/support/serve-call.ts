/** A JSON call to a running `serve` with its token: the status and the parsed body (null when empty). */
export type ServeCall = (method: string, url: string, body?: unknown) => Promise<{ status: number; json: any }>;

/** `serveCall(() => server)`: calls whichever server the getter gives (a test may restart it). */
export function serveCall(server: () => { url: string; token: string | null }): ServeCall {
  return async (method, url, body) => {
    const { url: base, token } = server();
    const res = await fetch(`${base}${url}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  };
}
