import cliProgress from 'cli-progress';
import type { JobEvent } from '../job/run-job.js';
import type { PoolEvent } from '../sandbox/pool/provider.js';

interface Counter {
  total: number;
  done: number;
  running: number;
  failed: number;
  tokens: number;
  cost: number | null;
  /** Sum of finished trials' durations, for the expected time of the ones left. */
  durationMs: number;
}

const fmtEta = (sec: number): string =>
  !Number.isFinite(sec)
    ? 'estimating'
    : sec > 3600
      ? `${(sec / 3600).toFixed(1)}h`
      : sec > 60
        ? `${Math.round(sec / 60)}m`
        : `${Math.round(sec)}s`;

/**
 * Seconds left for one configuration: its trials still to run, times the mean duration of its
 * finished ones, over the trials it runs at once (at least one). Unknown until a trial finished.
 */
export function etaSeconds(c: Pick<Counter, 'total' | 'done' | 'running' | 'durationMs'>, concurrency: number): number {
  if (c.done === 0) return Number.POSITIVE_INFINITY;
  const mean = c.durationMs / c.done / 1000;
  const left = Math.max(0, c.total - c.done);
  const lanes = Math.max(1, Math.min(concurrency, c.running || 1));
  // Trials already running are part-way through: count them as half done.
  return (Math.max(0, left - c.running / 2) * mean) / lanes;
}

/** An engine pool's event as one line for people (run's progress, check, serve). */
export function poolEventLine(e: PoolEvent): string {
  switch (e.type) {
    case 'engine-down':
      return `engine ${e.engine} lost (${e.reason.split('\n')[0]}): no new trials go there, its running trials are re-run elsewhere`;
    case 'engine-up':
      return `engine ${e.engine} answers again: taking trials${e.removed ? ` (removed ${e.removed} container(s) left from before)` : ''}`;
    case 'image-shipped':
      return `image ${e.image} copied from ${e.from} to ${e.engine} in ${(e.ms / 1000).toFixed(1)} s`;
  }
}

type Progress = { onEvent: (e: JobEvent) => void; stop: () => void };
type Fields = Record<string, string | number>;

/** What the job's events said so far: per configuration counts, and the image builds. */
export class JobTally {
  readonly counters = new Map<string, Counter>();
  readonly images = { building: [] as string[], started: 0, built: 0, failed: 0 };
  private readonly started = Date.now();
  private concurrency = 1;

  /** Counts the event in; returns the line it says to people, if any. */
  update(e: JobEvent): string | null {
    const { counters, images } = this;
    switch (e.type) {
      case 'job-start':
        this.concurrency = e.concurrency;
        for (const label of e.configs)
          counters.set(label, {
            total: e.pendingByConfig[label] ?? 0,
            done: 0,
            running: 0,
            failed: 0,
            tokens: 0,
            cost: null,
            durationMs: 0,
          });
        return null;
      case 'build-start':
        images.building.push(e.task);
        images.started += 1;
        return null;
      case 'build-done':
        images.building.splice(images.building.indexOf(e.task), 1);
        images.built += 1;
        return null;
      case 'build-failed':
        images.building.splice(images.building.indexOf(e.task), 1);
        images.failed += 1;
        return `build failed for ${e.task}: ${e.message.split('\n')[0]}`;
      case 'trial-start':
        counters.get(e.slot.config)!.running += 1;
        return null;
      case 'trial-done': {
        const c = counters.get(e.slot.config)!;
        c.running -= 1;
        // A trial an interrupt cancelled was not run (the summary says so): not done, no time to learn from.
        if (e.status === 'not_run') return null;
        c.done += 1;
        c.durationMs += e.durationMs;
        if (e.status === 'error') c.failed += 1;
        c.tokens += e.outputTokens;
        if (e.costUsd !== null) c.cost = (c.cost ?? 0) + e.costUsd;
        return null;
      }
      case 'engine-down':
      case 'engine-up':
      case 'image-shipped':
        return poolEventLine(e);
      default:
        return null;
    }
  }

  line(label: string, c: Counter): Fields {
    const mins = (Date.now() - this.started) / 60000;
    return {
      label: label.padEnd(24).slice(0, 24),
      running: c.running,
      failed: c.failed,
      rate: (mins > 0 ? c.done / mins : 0).toFixed(1),
      eta: fmtEta(etaSeconds(c, this.concurrency)),
      tokens: c.tokens,
      cost: c.cost === null ? '-' : `$${c.cost.toFixed(2)}`,
    };
  }

  imageLine(): string {
    const { images } = this;
    return `images: ${images.built} ready${images.building.length ? `, ${images.building.length} building (${images.building.slice(0, 3).join(', ')}${images.building.length > 3 ? ', ...' : ''})` : ''}${images.failed ? `, ${images.failed} failed` : ''}`;
  }
}

/** A status line per configuration every 10 s, and each event worth a line as it comes. */
function linesProgress(tally: JobTally): Progress {
  const { counters, images } = tally;
  const status = (): void => {
    if (images.building.length || images.failed) process.stderr.write(`${tally.imageLine()}\n`);
    for (const [label, c] of counters) {
      const l = tally.line(label, c);
      process.stderr.write(
        `[${label}] ${c.done}/${c.total} done, ${c.running} running, ${c.failed} failed, ${l.rate}/min, ETA ${l.eta}, ${c.tokens} output tokens, cost ${l.cost}\n`,
      );
    }
  };
  const timer = setInterval(status, 10_000);
  timer.unref();
  return {
    onEvent: (e) => {
      const said = tally.update(e);
      if (said) process.stderr.write(`${said}\n`);
      if (e.type === 'build-start' && images.building.length === 1 && images.built === 0)
        process.stderr.write(`building images (trials wait for their task's image)\n`);
    },
    stop: () => {
      clearInterval(timer);
      status();
    },
  };
}

/** Bars on a terminal: one for the image builds, one per configuration. */
function barsProgress(tally: JobTally): Progress {
  const { counters, images } = tally;
  const multi = new cliProgress.MultiBar(
    {
      format:
        '{label} [{bar}] {value}/{total} | run {running} | fail {failed} | {rate}/min | ETA {eta} | tok {tokens} | {cost}',
      stream: process.stderr,
      hideCursor: true,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  const bars = new Map<string, cliProgress.SingleBar>();
  let imageBar: cliProgress.SingleBar | null = null;
  const imageFields = (): Fields => ({
    label: 'images'.padEnd(24),
    running: images.building.length,
    failed: images.failed,
    rate: '-',
    eta: images.building.length ? 'building' : 'done',
    tokens: '-',
    cost: '-',
  });
  return {
    onEvent: (e) => {
      const said = tally.update(e);
      if (e.type === 'job-start')
        for (const [label, c] of counters) bars.set(label, multi.create(c.total, 0, tally.line(label, c)));
      if (e.type === 'build-start' && !imageBar) imageBar = multi.create(1, 0, imageFields());
      imageBar?.setTotal(images.started);
      imageBar?.update(images.built + images.failed, imageFields());
      if (said) multi.log(`${said}\n`);
      for (const [label, c] of counters) bars.get(label)?.update(c.done, tally.line(label, c));
    },
    stop: () => {
      for (const [label, c] of counters) bars.get(label)?.update(c.done, tally.line(label, c));
      multi.stop();
    },
  };
}

/**
 * Live progress for `run`: image builds as their own phase (built / building / failed), then per
 * configuration done / running / failed, rate, ETA, tokens and cost. Bars on a terminal; a status
 * line every 10 s otherwise; every event as a JSON line with --jsonl; nothing with --quiet.
 */
export function jobProgress(mode: 'tty' | 'lines' | 'jsonl' | 'quiet'): Progress {
  if (mode === 'quiet') return { onEvent: () => {}, stop: () => {} };
  if (mode === 'jsonl') return { onEvent: (e) => process.stdout.write(`${JSON.stringify(e)}\n`), stop: () => {} };
  return mode === 'lines' ? linesProgress(new JobTally()) : barsProgress(new JobTally());
}
