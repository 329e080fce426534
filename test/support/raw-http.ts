import { request } from 'node:http';
import { type ServeReply } from './serve-call.js';

/**
 * One HTTP request with headers and a path exactly as given (fetch sets Host itself and
 * normalises "..", "%2e%2e" out of paths: a hostile client does neither).
 */
export function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; json: ServeReply; headers: Record<string, string | string[] | undefined> }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            json = { text };
          }
          resolve({ status: res.statusCode ?? 0, json: json as ServeReply, headers: res.headers });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
