import { Writable } from 'node:stream';

/** What a command printed, bounded: the head and tail kept, the middle counted. */
export interface CapturedOutput {
  /** head + marker + tail, decoded as UTF-8 (invalid bytes replaced). */
  text: string;
  totalBytes: number;
  /** Bytes dropped from the middle; 0 when everything was kept. */
  truncatedBytes: number;
}

/**
 * A sink that never pushes back (so a chatty command cannot stall the engine's stream) and never
 * holds more than `limit` bytes: the first limit/2 and the last limit/2, with the count of the rest.
 */
export class OutputCapture extends Writable {
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  total = 0;

  constructor(limit: number) {
    super();
    this.headLimit = Math.floor(limit / 2);
    this.tailLimit = limit - this.headLimit;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.push(chunk);
    done();
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.headBytes < this.headLimit) {
      const take = Math.min(chunk.length, this.headLimit - this.headBytes);
      this.head.push(chunk.subarray(0, take));
      this.headBytes += take;
      chunk = chunk.subarray(take);
    }
    if (chunk.length === 0) return;
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    while (this.tailBytes - this.tail[0]!.length >= this.tailLimit) {
      this.tailBytes -= this.tail.shift()!.length;
    }
  }

  result(): CapturedOutput {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailLimit) tail = tail.subarray(tail.length - this.tailLimit);
    const truncatedBytes = this.total - head.length - tail.length;
    const text =
      truncatedBytes > 0
        ? `${head.toString('utf8')}\n[... ${truncatedBytes} bytes omitted ...]\n${tail.toString('utf8')}`
        : head.toString('utf8') + tail.toString('utf8');
    return { text, totalBytes: this.total, truncatedBytes };
  }
}
