import { SYSTEM_PATH } from '../sandbox/sandbox.js';

/** Bytes of the tests' output kept from its start (a multiple of 512: the shell's file size limit counts 512-byte blocks). */
export const TEST_OUTPUT_HEAD_BYTES = 8 * 1024 * 1024;
/** Bytes kept from its end, past the head (pytest's summary of the tests comes last). */
export const TEST_OUTPUT_TAIL_BYTES = 1024 * 1024;
/** Hundredths of a second the output is read on once test.sh ended, while a process it left running holds it open (polled each hundredth: a coarser poll cost every grading up to its step). */
const GRACE_HUNDREDTHS = 200;

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `run` (a shell command) with its output and errors written to `file` capped, in the verifier's
 * sandbox itself: the first TEST_OUTPUT_HEAD_BYTES, then, when there was more, a line saying so
 * and the last TEST_OUTPUT_TAIL_BYTES at most; what came between is read and dropped, never
 * written (tests that print a 3 GiB sparse file write 9 MiB, not 3 GiB). The exit status is
 * `run`'s.
 * - The output goes through a FIFO to a reader, not a pipe the shell waits on: a process test.sh
 *   left running that holds the output open cannot keep the verifier from ending. Once test.sh
 *   ends the reader gets GRACE_HUNDREDTHS/100 s to finish, then it is killed and the file says so.
 * - The reader is `cat` under a file size limit (written as read, nothing lost if it is killed),
 *   then `tail`; it runs in a session of its own (setsid) so that it can be killed whole.
 * - Only programs from the system folders, which the tamper scan watches (mkfifo, setsid, cat,
 *   tail, wc, sleep, rm); test.sh keeps its own PATH. Without mkfifo the output is written uncapped
 *   as before (the harness's own exec wrapper already needs these programs).
 */
export function cappedOutput(run: string, file: string): string {
  const f = `${file}.fifo`;
  const blocks = TEST_OUTPUT_HEAD_BYTES / 512;
  const cutNote = `\\n[termgrade: test output cut: its first ${TEST_OUTPUT_HEAD_BYTES} bytes above, at most its last ${TEST_OUTPUT_TAIL_BYTES} bytes below, what came between left out]\\n`;
  const openNote = `\\n[termgrade: the rest of the test output was not read: still open ${GRACE_HUNDREDTHS / 100} s after test.sh ended (a process it started holds it)]\\n`;
  const reader = `trap "" XFSZ; (ulimit -f ${blocks}; cat > "$1" 2>/dev/null); tail -c ${TEST_OUTPUT_TAIL_BYTES} > "$2"; : > "$3"`;
  return [
    `P=${SYSTEM_PATH}; o=${quote(file)}; f=${quote(f)}`,
    `PATH=$P rm -f "$f" "$f.tail" "$f.done"`,
    `if PATH=$P mkfifo -m 600 "$f" 2>/dev/null; then`,
    `  s=$(PATH=$P; command -v setsid)`,
    `  PATH=$P $s sh -c ${quote(reader)} termgrade-output "$o" "$f.tail" "$f.done" < "$f" &`,
    `  r=$!`,
    `  { ${run}; } > "$f" 2>&1`,
    `  c=$?`,
    `  i=0; while [ ! -e "$f.done" ] && [ $i -lt ${GRACE_HUNDREDTHS} ]; do PATH=$P sleep 0.01; i=$((i + 1)); done`,
    `  if [ ! -e "$f.done" ]; then kill -s KILL -- -$r $r 2>/dev/null; printf '${openNote}' >> "$o"`,
    `  elif [ "$(PATH=$P wc -c < "$o")" -ge ${TEST_OUTPUT_HEAD_BYTES} ]; then printf '${cutNote}' >> "$o"; PATH=$P cat "$f.tail" >> "$o"; fi`,
    `  PATH=$P rm -f "$f" "$f.tail" "$f.done"`,
    `  exit $c`,
    `fi`,
    `{ ${run}; } > "$o" 2>&1`,
  ].join('\n');
}
