import cliProgress from 'cli-progress';
import type { JobEvent } from '../job/run-job.js';

interface Counter {
  total: number;
  done: number;
  running: number;
  failed: number;
  tokens: number;
  cost: number | null;
}

const fmtEta = (sec: number): string => (!Number.isFinite(sec) ? '-' : sec > 3600 ? `${(sec / 3600).toFixed(1)}h` : sec > 60 ? `${Math.round(sec / 60)}m` : `${Math.round(sec)}s`);

/**
 * Live progress for `run`: per configuration done / running / failed, rate, ETA, tokens and cost.
 * A bar per configuration on a terminal; a status line every 10 s otherwise; every event as a
 * JSON line with --jsonl; nothing with --quiet.
 */
export function jobProgress(mode: 'tty' | 'lines' | 'jsonl' | 'quiet'): { onEvent: (e: JobEvent) => void; stop: () => void } {
  if (mode === 'quiet') return { onEvent: () => {}, stop: () => {} };
  if (mode === 'jsonl') return { onEvent: (e) => process.stdout.write(`${JSON.stringify(e)}\n`), stop: () => {} };
  const counters = new Map<string, Counter>();
  const started = Date.now();
  const line = (label: string, c: Counter): Record<string, string | number> => {
    const mins = (Date.now() - started) / 60000;
    const rate = mins > 0 ? c.done / mins : 0;
    return {
      label: label.padEnd(24).slice(0, 24),
      running: c.running,
      failed: c.failed,
      rate: rate.toFixed(1),
      eta: fmtEta(rate > 0 ? ((c.total - c.done) / rate) * 60 : Number.POSITIVE_INFINITY),
      tokens: c.tokens,
      cost: c.cost === null ? '-' : `$${c.cost.toFixed(2)}`,
    };
  };
  const update = (e: JobEvent): string | null => {
    if (e.type === 'job-start') {
      const per = e.pending / Math.max(1, e.configs.length);
      for (const label of e.configs) counters.set(label, { total: Math.round(per), done: 0, running: 0, failed: 0, tokens: 0, cost: null });
      return null;
    }
    if (e.type === 'trial-start') counters.get(e.slot.config)!.running += 1;
    if (e.type === 'trial-done') {
      const c = counters.get(e.slot.config)!;
      c.running -= 1;
      c.done += 1;
      if (e.status === 'error') c.failed += 1;
      c.tokens += e.outputTokens;
      if (e.costUsd !== null) c.cost = (c.cost ?? 0) + e.costUsd;
      return e.slot.config;
    }
    if (e.type === 'build-failed') return `build failed for ${e.task}: ${e.message.split('\n')[0]}`;
    return null;
  };
  if (mode === 'lines') {
    const status = (): void => {
      for (const [label, c] of counters) {
        const l = line(label, c);
        process.stderr.write(`[${label}] ${c.done}/${c.total} done, ${c.running} running, ${c.failed} failed, ${l.rate}/min, ETA ${l.eta}, ${c.tokens} output tokens, cost ${l.cost}\n`);
      }
    };
    const timer = setInterval(status, 10_000);
    timer.unref();
    return {
      onEvent: (e) => {
        const r = update(e);
        if (r?.startsWith('build failed')) process.stderr.write(`${r}\n`);
      },
      stop: () => {
        clearInterval(timer);
        status();
      },
    };
  }
  const multi = new cliProgress.MultiBar(
    { format: '{label} [{bar}] {value}/{total} | run {running} | fail {failed} | {rate}/min | ETA {eta} | tok {tokens} | {cost}', stream: process.stderr, hideCursor: true, clearOnComplete: false },
    cliProgress.Presets.shades_classic,
  );
  const bars = new Map<string, cliProgress.SingleBar>();
  return {
    onEvent: (e) => {
      const r = update(e);
      if (e.type === 'job-start') for (const [label, c] of counters) bars.set(label, multi.create(c.total, 0, line(label, c)));
      if (r?.startsWith('build failed')) multi.log(`${r}\n`);
      for (const [label, c] of counters) bars.get(label)?.update(c.done, line(label, c));
    },
    stop: () => multi.stop(),
  };
}
