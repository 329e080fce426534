/**
 * TEST DOUBLE scripts: model replies that solve (or fail) bundled example tasks, for the
 * scripted model server. Deterministic, so an agent run is a repeatable test.
 */
import type { ScriptStep } from './scripted-model-server.js';

const CSV_SOLUTION = `python3 - <<'PY'
import csv, json
totals = {}
for row in csv.DictReader(open('/app/sales.csv')):
    if not row['units'].strip().isdigit():
        continue
    t = totals.setdefault(row['region'], {'units': 0, 'revenue': 0.0})
    t['units'] += int(row['units'])
    t['revenue'] += int(row['units']) * float(row['unit_price'])
json.dump({k: {'units': v['units'], 'revenue': round(v['revenue'], 2)} for k, v in sorted(totals.items())}, open('/app/summary.json', 'w'))
PY
`;

const LOG_SOLUTION = `cat /var/log/app/*.log | awk '$2 == "ERROR" { sub(":$", "", $3); n[$3]++ } END { for (s in n) print s, n[s] }' | sort -k2,2nr -k1,1 > /app/errors.txt
`;

export const turn = (
  commands: Array<{ keystrokes: string; duration?: number }>,
  complete = false,
  analysis = 'looking',
): ScriptStep => ({
  reply: { content: JSON.stringify({ analysis, plan: 'next step', commands, task_complete: complete }) },
});

export const bash = (command: string): ScriptStep => ({
  reply: { toolCalls: [{ name: 'bash', arguments: JSON.stringify({ command }) }] },
});

export const TERMINUS_SOLVES: Record<string, ScriptStep[]> = {
  'csv-summary': [
    turn([{ keystrokes: 'ls /app\n', duration: 0.3 }]),
    turn([{ keystrokes: CSV_SOLUTION, duration: 1 }]),
    turn([], true),
    turn([], true),
  ],
  'log-errors': [turn([{ keystrokes: LOG_SOLUTION, duration: 0.5 }]), turn([], true), turn([], true)],
};

export const BASH_SOLVES: Record<string, ScriptStep[]> = {
  'csv-summary': [bash('head -3 /app/sales.csv'), bash(CSV_SOLUTION), bash('echo TERMGRADE_TASK_COMPLETE')],
  'log-errors': [bash(LOG_SOLUTION), bash('cat /app/errors.txt'), bash('echo TERMGRADE_TASK_COMPLETE')],
};
