import { SYSTEM_PATH } from '../sandbox/sandbox.js';

/** Bytes of the tests' output kept from its start (a multiple of 512: the shell's file size limit counts 512-byte blocks). */
export const TEST_OUTPUT_HEAD_BYTES = 8 * 1024 * 1024;
/** Bytes kept from its end, past the head (pytest's summary of the tests comes last). */
export const TEST_OUTPUT_TAIL_BYTES = 1024 * 1024;
/** Seconds the output is read on once test.sh ended, while a process it left running holds it open. */
const GRACE_SEC = 2;

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `run` (a shell command) with its output and errors written to `file` capped, in the verifier's
 * sandbox itself: the first TEST_OUTPUT_HEAD_BYTES, then, when there was more, a line saying so
 * and the last TEST_OUTPUT_TAIL_BYTES at most; what came between is read and dropped, never
 * written (tests that print a 3 GiB sparse file write 9 MiB, not 3 GiB). The exit status is
 * `run`'s.
 * - The output goes through a FIFO to a reader, not a pipe the shell waits on: a process test.sh
 *   left running that holds the output open cannot keep the verifier from ending. Once test.sh
 *   ends the reader gets GRACE_SEC to finish (a timer kills it then, and the file says so); the
 *   shell waits for the reader itself, so an output read whole costs no polling.
 * - The reader is `cat` under a file size limit (written as read, nothing lost if it is killed);
 *   only when the limit stopped it does `tail` read on, and the reader's done-file then says "cut".
 *   It runs in a session of its own (setsid) so that it can be killed whole.
 * - Only programs from the system folders, which the tamper scan watches (mkfifo, setsid, cat,
 *   tail, sleep, rm); test.sh keeps its own PATH. Without mkfifo the output is written uncapped
 *   as before (the harness's own exec wrapper already needs these programs).
 */
export function cappedOutput(run: string, file: string): string {
  const f = `${file}.fifo`;
  const blocks = TEST_OUTPUT_HEAD_BYTES / 512;
  const cutNote = `\n[termgrade: test output cut: its first ${TEST_OUTPUT_HEAD_BYTES} bytes above, at most its last ${TEST_OUTPUT_TAIL_BYTES} bytes below, what came between left out]\n`;
  const openNote = `\n[termgrade: the rest of the test output was not read: still open ${GRACE_SEC} s after test.sh ended (a process it started holds it)]\n`;
  // cat stops with an error at the size limit (SIGXFSZ ignored); only then is there more to read.
  const reader = `trap "" XFSZ; if (ulimit -f ${blocks}; cat > "$1" 2>/dev/null); then : > "$3"; else tail -c ${TEST_OUTPUT_TAIL_BYTES} > "$2"; echo cut > "$3"; fi`;
  const any = (x: string): string => `[ -e "${x}" ] || [ -L "${x}" ]`;
  return [
    `P=${SYSTEM_PATH}; o=${quote(file)}; f=${quote(f)}`,
    `if ${any('$f')} || ${any('$f.tail')} || ${any('$f.done')}; then PATH=$P rm -f "$f" "$f.tail" "$f.done"; fi`,
    `if PATH=$P mkfifo -m 600 "$f" 2>/dev/null; then`,
    `  s=$(PATH=$P; command -v setsid)`,
    `  PATH=$P $s sh -c ${quote(reader)} termgrade-output "$o" "$f.tail" "$f.done" < "$f" &`,
    `  r=$!`,
    `  { ${run}; } > "$f" 2>&1`,
    `  c=$?`,
    // The timer ends the reader (its whole session) if it is still reading after the grace; ended
    // itself once the reader is done, its sleep with it (nothing of it outlives the wrapper).
    `  (trap 'kill $w; exit' TERM; PATH=$P sleep ${GRACE_SEC} & w=$!; wait $w; kill -s KILL -- -$r $r) 2>/dev/null &`,
    `  k=$!`,
    `  wait $r 2>/dev/null`,
    `  kill $k 2>/dev/null`,
    `  if [ ! -e "$f.done" ]; then printf '${openNote}' >> "$o"`,
    `  elif [ -s "$f.done" ]; then printf '${cutNote}' >> "$o"; PATH=$P cat "$f.tail" >> "$o"; fi`,
    `  PATH=$P rm -f "$f" "$f.tail" "$f.done"`,
    `  exit $c`,
    `fi`,
    `{ ${run}; } > "$o" 2>&1`,
  ].join('\n');
}
