/**
 * Whether a Docker network may carry trials (`run --network`): the host must hold no address on
 * it, so no trial reaches the host's services, and no container may get a private-range address
 * (10/8, 172.16/12, 192.168/16: the neighbours a trial could reach there are someone's machines).
 * Pure: decided from the engine's inspection of the network.
 */
export interface NetworkInspection {
  Name?: string;
  Driver?: string;
  Internal?: boolean;
  Options?: Record<string, string> | null;
  IPAM?: { Config?: Array<{ Subnet?: string; Gateway?: string }> | null } | null;
}

/** The bridge option that keeps the host from taking the gateway address on the bridge. */
export const INHIBIT_IPV4 = 'com.docker.network.bridge.inhibit_ipv4';

const PRIVATE: Array<[number, number]> = [
  [0x0a000000, 8],
  [0xac100000, 12],
  [0xc0a80000, 16],
];

function ipv4(text: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return null;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

/** Whether an IPv4 subnet (a.b.c.d/n) overlaps a private range. */
export function overlapsPrivateRange(subnet: string): boolean {
  const [addr, bits] = subnet.split('/');
  const start = ipv4(addr ?? '');
  const len = Number(bits);
  if (start === null || !Number.isInteger(len) || len < 0 || len > 32) return false;
  return PRIVATE.some(([base, plen]) => {
    const common = Math.min(plen, len);
    const mask = common === 0 ? 0 : (0xffffffff << (32 - common)) >>> 0;
    return (start & mask) >>> 0 === (base & mask) >>> 0;
  });
}

/** Why trials may not use this network, or null when they may. */
export function trialNetworkRefusal(info: NetworkInspection): string | null {
  const name = info.Name ?? 'the network';
  const subnets = (info.IPAM?.Config ?? []).map((c) => c.Subnet).filter((s): s is string => Boolean(s));
  const priv = subnets.filter(overlapsPrivateRange);
  if (priv.length)
    return `network "${name}" has the private-range subnet ${priv.join(', ')}: trials would get private-range addresses; create it with another --subnet (100.64.0.0/10, say)`;
  switch (info.Driver) {
    case 'bridge':
      if (info.Options?.[INHIBIT_IPV4] !== 'true') {
        return `network "${name}" is a bridge on which the host holds the gateway address, so trials could reach the host's services; create it with -o ${INHIBIT_IPV4}=true (the host then holds no address on it; give it a way out through a router or proxy container of your own)`;
      }
      return null;
    case 'macvlan':
    case 'ipvlan':
      // The host cannot reach its own macvlan / ipvlan children through their parent interface.
      return null;
    default:
      return `network "${name}" uses the ${info.Driver ?? 'unknown'} driver: trials run on a bridge with -o ${INHIBIT_IPV4}=true, or on a macvlan or ipvlan network`;
  }
}
