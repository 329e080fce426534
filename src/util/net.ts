/** Whether a host name or address is this machine's loopback (IPv4 127/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  return /^(localhost|127\.\d+\.\d+\.\d+|\[?::1\]?)$/.test(host);
}
