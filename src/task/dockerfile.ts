/**
 * Just enough of the Dockerfile language to know what an image is made from: logical lines (line
 * continuations joined, comments dropped, heredoc bodies kept with their instruction), the
 * images each stage starts FROM and copies --from, with global ARG defaults substituted. Pure.
 */
export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY ... */
  keyword: string;
  /** Everything after the keyword on the (joined) line. */
  args: string;
  /** Heredoc bodies the line opened (`<<EOT` ... `EOT`), in order. */
  heredocs: Array<{ name: string; body: string }>;
  /** 1-based line of the instruction in the file. */
  line: number;
}

const HEREDOC = /<<(-?)(["']?)([A-Za-z_][A-Za-z0-9_]*)\2/g;

export function parseDockerfile(text: string): Instruction[] {
  const lines = text.split(/\r?\n/);
  const out: Instruction[] = [];
  let i = 0;
  while (i < lines.length) {
    const start = i;
    let line = lines[i++]!;
    if (/^\s*(#|$)/.test(line)) continue;
    // Continuations: a trailing backslash joins the next line (comment lines inside are skipped).
    while (/\\\s*$/.test(line) && i < lines.length) {
      const next = lines[i++]!;
      if (/^\s*#/.test(next)) continue;
      line = line.replace(/\\\s*$/, ' ') + next;
    }
    const m = /^\s*([A-Za-z]+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const keyword = m[1]!.toUpperCase();
    const args = m[2]!;
    const heredocs: Instruction['heredocs'] = [];
    if (keyword === 'RUN' || keyword === 'COPY' || keyword === 'ADD') {
      for (const h of args.matchAll(HEREDOC)) {
        const body: string[] = [];
        const strip = h[1] === '-';
        while (i < lines.length && (strip ? lines[i]!.replace(/^\t+/, '') : lines[i]!) !== h[3])
          body.push(strip ? lines[i++]!.replace(/^\t+/, '') : lines[i++]!);
        i += 1; // the terminator
        heredocs.push({ name: h[3]!, body: body.length ? `${body.join('\n')}\n` : '' });
      }
    }
    out.push({ keyword, args, heredocs, line: start + 1 });
  }
  return out;
}

/** `$VAR`, `${VAR}`, `${VAR:-default}` with the given values; unknown variables become empty. */
export function substitute(text: string, vars: Map<string, string>): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_m, a: string | undefined, def: string | undefined, b: string | undefined) => {
      const v = vars.get((a ?? b)!);
      return v !== undefined && v !== '' ? v : (def ?? '');
    },
  );
}

/**
 * The external images a Dockerfile builds from: every stage's FROM that is not an earlier stage
 * (nor `scratch`), and every `COPY --from=` that names an image. In order, without repeats.
 */
export function baseImages(text: string): string[] {
  const instructions = parseDockerfile(text);
  const globals = new Map<string, string>();
  const stages = new Set<string>();
  const images: string[] = [];
  const add = (ref: string): void => {
    if (ref && ref !== 'scratch' && !stages.has(ref.toLowerCase()) && !/^\d+$/.test(ref) && !images.includes(ref))
      images.push(ref);
  };
  let seenFrom = false;
  for (const ins of instructions) {
    if (ins.keyword === 'ARG' && !seenFrom) {
      for (const part of ins.args.split(/\s+/)) {
        const [name, ...value] = part.split('=');
        if (name) globals.set(name, substitute(value.join('=').replace(/^["']|["']$/g, ''), globals));
      }
    } else if (ins.keyword === 'FROM') {
      seenFrom = true;
      const words = substitute(ins.args, globals)
        .split(/\s+/)
        .filter((w) => w && !w.startsWith('--'));
      add(words[0] ?? '');
      if (words[1]?.toUpperCase() === 'AS' && words[2]) stages.add(words[2].toLowerCase());
    } else if (ins.keyword === 'COPY') {
      const from = /--from=(\S+)/.exec(ins.args)?.[1];
      if (from) add(substitute(from, globals));
    }
  }
  return images;
}

/** Whether the file needs a builder that understands heredocs (`RUN <<EOF`, `COPY <<EOT /file`). */
export function usesHeredocs(text: string): boolean {
  return parseDockerfile(text).some((i) => i.heredocs.length > 0);
}

/** Where translated heredoc files go in the build context. */
export const HEREDOC_DIR = '.termgrade-heredocs';

/**
 * Rewrites Dockerfile heredocs (`RUN <<EOF`, `RUN cmd <<EOF`, `COPY <<EOT /dest`) into the forms
 * every builder accepts, for engines whose BuildKit frontend predates them (and the legacy
 * builder): a RUN becomes an exec-form RUN whose shell gets the original text (shell heredocs are
 * the shell's own syntax; a bare `RUN <<EOF` script is written to a temporary file and run, so a
 * shebang line still picks its interpreter); a COPY/ADD heredoc becomes a file in the build context
 * (under HEREDOC_DIR) copied the same way. Flags (--mount, --chmod ...) are kept. Content is copied
 * verbatim: variables in a COPY heredoc are not expanded (BuildKit would expand unquoted ones).
 * Returns null when the file has no heredoc.
 */
export function translateHeredocs(
  text: string,
): { dockerfile: string; files: Array<{ path: string; content: string }> } | null {
  const lines = text.split(/\r?\n/);
  const out: string[] = [];
  const files: Array<{ path: string; content: string }> = [];
  let shell = ['/bin/sh', '-c'];
  let i = 0;
  let changed = false;
  while (i < lines.length) {
    let line = lines[i++]!;
    if (/^\s*#/.test(line) || /^\s*$/.test(line)) {
      out.push(line);
      continue;
    }
    while (/\\\s*$/.test(line) && i < lines.length) line = line.replace(/\\\s*$/, ' ') + lines[i++]!;
    const m = /^(\s*)([A-Za-z]+)(\s+)([\s\S]*)$/.exec(line);
    const keyword = m?.[2]!.toUpperCase();
    if (keyword === 'SHELL') {
      try {
        shell = JSON.parse(m![4]!) as string[];
      } catch {
        // not the JSON form: keep the default
      }
    }
    const markers =
      m && (keyword === 'RUN' || keyword === 'COPY' || keyword === 'ADD') ? [...m[4]!.matchAll(HEREDOC)] : [];
    if (!m || markers.length === 0) {
      out.push(line);
      continue;
    }
    changed = true;
    const bodies: string[] = [];
    for (const h of markers) {
      const body: string[] = [];
      const strip = h[1] === '-';
      while (i < lines.length && (strip ? lines[i]!.replace(/^\t+/, '') : lines[i]!) !== h[3])
        body.push(strip ? lines[i++]!.replace(/^\t+/, '') : lines[i++]!);
      i += 1;
      bodies.push(body.length ? `${body.join('\n')}\n` : '');
    }
    const args = m[4]!;
    const flags = /^((?:--\S+\s+)*)/.exec(args)?.[1] ?? '';
    const rest = args.slice(flags.length);
    if (keyword === 'RUN') {
      let script: string;
      if (markers.length === 1 && rest.trim() === markers[0]![0]) {
        // The heredoc is the script itself: run it as a file, so a shebang picks its interpreter.
        const tag = `TG_HEREDOC_${out.length}`;
        script = `f=$(mktemp) && cat > "$f" <<'${tag}'\n${bodies[0]}${tag}\nchmod +x "$f" && "$f"; rc=$?; rm -f "$f"; exit $rc`;
      } else {
        // The shell reads heredocs itself: give it the line and the bodies as written.
        script = `${rest}\n${markers.map((h, k) => `${bodies[k]}${h[3]}\n`).join('')}`;
      }
      out.push(`${m[1]}RUN ${flags}${JSON.stringify([...shell, script])}`);
    } else {
      let k = 0;
      const dir = `${HEREDOC_DIR}/${files.length}`;
      const replaced = rest.replace(HEREDOC, (_all, _dash, _q, name: string) => {
        files.push({ path: `${dir}/${name}`, content: bodies[k++]! });
        return `${dir}/${name}`;
      });
      out.push(`${m[1]}${keyword} ${flags}${replaced}`);
    }
  }
  return changed ? { dockerfile: out.join('\n'), files } : null;
}
