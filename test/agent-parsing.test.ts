import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTurn } from '../src/agent/terminus/parse.js';
import { newOutput, sendKeysCommand } from '../src/agent/terminus/screen.js';
import { truncateMiddle } from '../src/agent/truncate.js';
import { makeScrub } from '../src/util/scrub.js';

describe('terminus reply parsing', () => {
  const good = { analysis: 'a', plan: 'p', commands: [{ keystrokes: 'ls\n', duration: 0.5 }], task_complete: false };

  it('reads a clean reply with no warnings, defaulting and capping durations', () => {
    const r = parseTurn(
      JSON.stringify({ ...good, commands: [{ keystrokes: 'a\n' }, { keystrokes: 'b\n', duration: 500 }] }),
    );
    assert.ok(r.ok);
    assert.deepEqual(r.turn.commands, [
      { keystrokes: 'a\n', duration: 1 },
      { keystrokes: 'b\n', duration: 60 },
    ]);
    assert.deepEqual(r.warnings, []);
  });

  it('repairs JSON wrapped in prose or a code fence, with a warning', () => {
    const r = parseTurn('Sure! Here is my answer:\n```json\n' + JSON.stringify(good) + '\n```\nHope it helps.');
    assert.ok(r.ok);
    assert.deepEqual(r.warnings, ['extra text around the JSON object was ignored']);
  });

  it('repairs missing closing brackets, with a warning', () => {
    const text = JSON.stringify(good);
    const r = parseTurn(text.slice(0, -1));
    assert.ok(r.ok, JSON.stringify(r));
    assert.ok(r.warnings.includes('missing closing brackets were added'));
    const r2 = parseTurn('{"analysis": "x", "plan": "y", "commands": [{"keystrokes": "ls\\n"');
    assert.ok(r2.ok);
    assert.equal(r2.turn.commands[0]!.keystrokes, 'ls\n');
  });

  it('refuses what it cannot repair, saying why', () => {
    assert.deepEqual(parseTurn('I will now run ls.'), { ok: false, error: 'no JSON object found in the reply' });
    const bad = parseTurn('{"analysis": "x", "commands": "ls"}');
    assert.equal(bad.ok, false);
    assert.match(!bad.ok ? bad.error : '', /field "commands"/);
    assert.equal(parseTurn('{"analysis": "x", "commands": [}').ok, false);
  });
});

describe('tmux keystrokes and screen diffs', () => {
  it('sends text literally, newlines as Enter, and lone key names as keys', () => {
    assert.equal(sendKeysCommand('s', 'ls -la\n'), `tmux send-keys -t s -l -- 'ls -la' \\; send-keys -t s Enter`);
    assert.equal(sendKeysCommand('s', 'C-c'), 'tmux send-keys -t s C-c');
    assert.equal(
      sendKeysCommand('s', "echo 'hi'\n"),
      `tmux send-keys -t s -l -- 'echo '\\''hi'\\''' \\; send-keys -t s Enter`,
    );
    assert.equal(
      sendKeysCommand('s', 'a\n\nb'),
      `tmux send-keys -t s -l -- 'a' \\; send-keys -t s Enter \\; send-keys -t s Enter \\; send-keys -t s -l -- 'b'`,
    );
    assert.equal(sendKeysCommand('s', ''), null);
  });

  it('finds what is new since the last capture, including text typed on the prompt line', () => {
    const before = 'root@x:/app# ls\na.txt\nroot@x:/app# ';
    const after = 'root@x:/app# ls\na.txt\nroot@x:/app# cat a.txt\nhello\nroot@x:/app# \n\n';
    assert.equal(newOutput(before, after), 'cat a.txt\nhello\nroot@x:/app# ');
    assert.equal(newOutput('', 'first\n'), 'first');
    assert.equal(newOutput(before, before), '');
    // A one-line history (just the prompt) must not match the *new* prompt at the end.
    assert.equal(newOutput('root@x:/app#', 'root@x:/app# seq 2\n1\n2\nroot@x:/app#'), ' seq 2\n1\n2\nroot@x:/app#');
    assert.equal(newOutput('gone\nfrom\nhistory', 'something else entirely'), null);
  });

  it('finds new output when old history scrolled out of the capture window', () => {
    const lines = Array.from({ length: 100 }, (_, i) => `line ${i}`);
    const before = [...lines.slice(0, 80), '$ '].join('\n');
    const after = [...lines.slice(50, 80), '$ seq', 'more', '$ '].join('\n');
    assert.equal(newOutput(before, after), 'seq\nmore\n$ ');
  });
});

describe('truncation and scrubbing', () => {
  it('keeps the first and last 5,000 bytes and says how much was cut', () => {
    const text = 'a'.repeat(6000) + 'b'.repeat(8000) + 'c'.repeat(6000);
    const t = truncateMiddle(text);
    assert.ok(t.startsWith('a'.repeat(5000) + '\n[... output truncated: 10000 bytes omitted ...]\n'));
    assert.ok(t.endsWith('c'.repeat(5000)));
    assert.equal(truncateMiddle('short'), 'short');
  });

  it('never splits a UTF-8 character', () => {
    const t = truncateMiddle('é'.repeat(20000));
    assert.ok(!t.includes('\uFFFD'));
  });

  it('scrubs every occurrence of each secret', () => {
    const scrub = makeScrub(['sk-secret-123', null, 'abc']);
    assert.equal(scrub('key sk-secret-123 and sk-secret-123, abc'), 'key [REDACTED] and [REDACTED], abc');
  });
});
