import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OutputCapture } from '../src/sandbox/capture.js';

describe('OutputCapture', () => {
  it('keeps everything under the limit', () => {
    const c = new OutputCapture(100);
    c.push(Buffer.from('hello '));
    c.push(Buffer.from('world'));
    assert.deepEqual(c.result(), { text: 'hello world', totalBytes: 11, truncatedBytes: 0 });
  });

  it('keeps the head and the tail and counts the middle, across chunk boundaries', () => {
    const c = new OutputCapture(10);
    const data = 'abcdefghijklmnopqrstuvwxyz';
    for (const ch of data) c.push(Buffer.from(ch));
    const r = c.result();
    assert.equal(r.totalBytes, 26);
    assert.equal(r.truncatedBytes, 16);
    assert.equal(r.text, 'abcde\n[... 16 bytes omitted ...]\nvwxyz');
  });

  it('stays bounded for 50 MB written in 64 KiB chunks', () => {
    const c = new OutputCapture(1024);
    const chunk = Buffer.alloc(65536, 'x');
    for (let i = 0; i < 800; i++) c.push(chunk);
    const r = c.result();
    assert.equal(r.totalBytes, 800 * 65536);
    assert.equal(r.truncatedBytes, 800 * 65536 - 1024);
  });
});
