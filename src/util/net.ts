import { timingSafeEqual } from 'node:crypto';

/** Whether a host name or address is this machine's loopback (IPv4 127/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  return /^(localhost|127\.\d+\.\d+\.\d+|\[?::1\]?)$/.test(host);
}

/** Whether a token someone sent is the server's, compared in constant time (no timing hint). */
export function tokenEquals(given: string, want: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(want);
  return a.length === b.length && timingSafeEqual(a, b);
}
