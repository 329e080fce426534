/**
 * Which slot a trial folder in flight belongs to, read from its name. A job names a trial's
 * folder `<task>__<configuration>__<attempt>` (then `__retryN` for an infrastructure retry), each
 * part made file-safe (job/run-job.ts); the store learns the slot only when the trial ends.
 * Known configuration labels and task names are matched in their file-safe form; an unknown one
 * is shown as the folder names it.
 */
const fileSafe = (s: string): string => s.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 80);

export function runningSlotOf(
  trialId: string,
  labels: string[],
  tasks: string[] = [],
): { task: string; config: string; attempt: number } {
  const m = /^(.*)__(\d+)(?:__retry\d+)?$/.exec(trialId);
  if (!m) return { task: trialId, config: '?', attempt: 0 };
  const head = m[1]!;
  const attempt = Number(m[2]);
  // The longest label first: "a" must not take a trial of "a__b".
  for (const label of [...labels].sort((a, b) => b.length - a.length)) {
    const suffix = `__${fileSafe(label)}`;
    if (head.endsWith(suffix)) {
      const safeTask = head.slice(0, -suffix.length);
      return { task: tasks.find((t) => fileSafe(t) === safeTask) ?? safeTask, config: label, attempt };
    }
  }
  const at = head.lastIndexOf('__');
  return at > 0
    ? { task: head.slice(0, at), config: head.slice(at + 2), attempt }
    : { task: head, config: '?', attempt };
}
