/**
 * Keeps the first and last `half` bytes of an observation and says how much was cut, as the
 * field's scaffolds do (10,000 bytes: 5,000 + 5,000). Cuts on UTF-8 character boundaries.
 */
export function truncateMiddle(text: string, maxBytes = 10_000): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= maxBytes) return text;
  const half = Math.floor(maxBytes / 2);
  let headEnd = half;
  while (headEnd > 0 && (buf[headEnd]! & 0xc0) === 0x80) headEnd--;
  let tailStart = buf.length - half;
  while (tailStart < buf.length && (buf[tailStart]! & 0xc0) === 0x80) tailStart++;
  const omitted = tailStart - headEnd;
  return `${buf.subarray(0, headEnd).toString('utf8')}\n[... output truncated: ${omitted} bytes omitted ...]\n${buf.subarray(tailStart).toString('utf8')}`;
}
