import { shellQuote } from '../../util/shell-quote.js';

/**
 * Terminal bookkeeping for the tmux agent, pure: turning keystrokes into tmux commands and
 * working out what is new on the screen since the last look.
 */

/** tmux key names that a keystrokes string may be on its own (sent as a key, not as text). */
const KEY_NAME =
  /^(?:[CMS]-.{1,3}|Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PageUp|PageDown|PPage|NPage|IC|DC|F\d{1,2})$/;

/**
 * One tmux invocation that types `keystrokes` into `target`: text is sent literally (-l), each
 * newline as an Enter key, and a string that is just a key name (C-c, Escape...) as that key.
 */
export function sendKeysCommand(target: string, keystrokes: string): string | null {
  if (keystrokes === '') return null;
  const parts: string[] = [];
  if (KEY_NAME.test(keystrokes.trim()) && !keystrokes.includes('\n')) {
    parts.push(`send-keys -t ${target} ${keystrokes.trim()}`);
  } else {
    const lines = keystrokes.split('\n');
    lines.forEach((line, i) => {
      if (line !== '') parts.push(`send-keys -t ${target} -l -- ${shellQuote(line)}`);
      if (i < lines.length - 1) parts.push(`send-keys -t ${target} Enter`);
    });
  }
  return `tmux ${parts.join(' \\; ')}`;
}

const trimEnd = (lines: string[]): string[] => {
  let n = lines.length;
  while (n > 0 && lines[n - 1]!.trim() === '') n--;
  return lines.slice(0, n);
};

/**
 * The lines of `current` that came after what `previous` showed. The last line of `previous` is
 * allowed to have grown (a prompt the model then typed on), so matching anchors on the lines
 * before it. Returns null when `previous` cannot be found (the screen was cleared or scrolled
 * out of the captured history): the caller then shows the visible screen.
 */
export function newOutput(previous: string, current: string): string | null {
  const prev = trimEnd(previous.split('\n'));
  const cur = trimEnd(current.split('\n'));
  if (prev.length === 0) return cur.join('\n');
  // The usual case: nothing scrolled out of the captured window, so `previous` is a prefix.
  const head = prev.length - 1;
  if (
    cur.length > head &&
    prev.slice(0, head).every((line, j) => cur[j] === line) &&
    cur[head]!.startsWith(prev[head]!)
  ) {
    return after(cur, head, prev[head]!);
  }
  const anchor = prev.slice(Math.max(0, prev.length - 40), -1);
  const last = prev[prev.length - 1]!;
  for (let i = cur.length - anchor.length - 1; i >= 0; i--) {
    let match = true;
    for (let j = 0; j < anchor.length; j++) {
      if (cur[i + j] !== anchor[j]) {
        match = false;
        break;
      }
    }
    const grown = cur[i + anchor.length];
    if (!match || grown === undefined || !grown.startsWith(last)) continue;
    return after(cur, i + anchor.length, last);
  }
  // The capture window moved past the start of the anchor: the screen now begins inside it.
  for (let k = anchor.length - 1; k >= Math.min(3, anchor.length); k--) {
    const tail = anchor.slice(anchor.length - k);
    if (tail.every((line, j) => cur[j] === line) && cur[k]?.startsWith(last)) return after(cur, k, last);
  }
  return null;
}

/** Everything from line `at` on, minus the part of that line that was already there. */
function after(cur: string[], at: number, last: string): string {
  const rest = [cur[at]!.slice(last.length), ...cur.slice(at + 1)];
  return trimEnd(rest).join('\n').replace(/^\n/, '');
}
