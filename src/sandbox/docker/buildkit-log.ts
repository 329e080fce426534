/**
 * BuildKit reports build progress through the Engine API as `moby.buildkit.trace` messages: base64
 * protobuf `StatusResponse`s (vertexes = build steps, their logs, errors). This turns them into the
 * plain build log `docker build --progress=plain` prints, so a BuildKit build keeps a readable log
 * like a legacy one. Only the few fields needed are read; the wire format is protobuf's own
 * (varints and length-delimited fields), read here in a few lines rather than with a code
 * generator for three messages.
 */

type Field = { no: number; varint?: number; bytes?: Buffer };

function* fields(buf: Buffer): Generator<Field> {
  let i = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (i >= buf.length) throw new RangeError('truncated varint');
      const b = buf[i++]!;
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result;
      shift += 7;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const no = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) yield { no, varint: varint() };
    else if (wire === 2) {
      const len = varint();
      yield { no, bytes: buf.subarray(i, i + len) };
      i += len;
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else throw new RangeError(`unsupported protobuf wire type ${wire}`);
  }
}

interface VertexState {
  n: number;
  started: boolean;
  done: boolean;
}

/** Feeds trace messages in, gets log lines out (with a trailing newline each). */
export class BuildkitLog {
  private readonly vertexes = new Map<string, VertexState>();

  private vertex(digest: string): VertexState {
    let v = this.vertexes.get(digest);
    if (!v) this.vertexes.set(digest, (v = { n: this.vertexes.size + 1, started: false, done: false }));
    return v;
  }

  /** The lines one `aux` payload (base64) adds to the log; an unreadable payload adds none. */
  lines(aux: string): string[] {
    const out: string[] = [];
    try {
      for (const f of fields(Buffer.from(aux, 'base64'))) {
        if (!f.bytes) continue;
        if (f.no === 1) this.readVertex(f.bytes, out);
        else if (f.no === 3) this.readLog(f.bytes, out);
      }
    } catch {
      // A payload that does not parse (fields() throws on a malformed one) costs a log line, never the build.
    }
    return out;
  }

  private readVertex(buf: Buffer, out: string[]): void {
    let digest = '';
    let name = '';
    let cached = false;
    let started = false;
    let completed = false;
    let error = '';
    for (const f of fields(buf)) {
      if (f.no === 1) digest = f.bytes!.toString('utf8');
      else if (f.no === 3) name = f.bytes!.toString('utf8');
      else if (f.no === 4) cached = f.varint === 1;
      else if (f.no === 5) started = true;
      else if (f.no === 6) completed = true;
      else if (f.no === 7) error = f.bytes!.toString('utf8');
    }
    const v = this.vertex(digest);
    if (!v.started && (started || cached || completed)) {
      v.started = true;
      out.push(`#${v.n} ${name}\n`);
    }
    if (cached && !v.done) {
      v.done = true;
      out.push(`#${v.n} CACHED\n`);
    } else if (error && !v.done) {
      v.done = true;
      out.push(`#${v.n} ERROR: ${error}\n`);
    } else if (completed && !v.done) {
      v.done = true;
      out.push(`#${v.n} DONE\n`);
    }
  }

  private readLog(buf: Buffer, out: string[]): void {
    let digest = '';
    let msg = '';
    for (const f of fields(buf)) {
      if (f.no === 1) digest = f.bytes!.toString('utf8');
      else if (f.no === 4) msg = f.bytes!.toString('utf8');
    }
    const n = this.vertex(digest).n;
    for (const line of msg.split('\n')) if (line !== '') out.push(`#${n} ${line}\n`);
  }
}
