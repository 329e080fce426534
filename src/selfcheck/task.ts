import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** The Debian image the checks' task builds on by default (any image with sh, coreutils and bash). */
export const SELFCHECK_IMAGE = 'debian:bookworm-slim';

/** Writes the checks' task folder into `dir`: the tests pass only when /app/out.txt says hello. */
export async function writeSelfcheckTask(dir: string, image: string, testSh?: string): Promise<string> {
  const files: Record<string, string> = {
    'task.toml': '[task]\nname = "selfcheck"\n\n[verifier]\ntimeout_sec = 60\n\n[agent]\ntimeout_sec = 60\n',
    'instruction.md': 'Write hello into /app/out.txt.\n',
    'environment/Dockerfile': `FROM ${image}\nWORKDIR /app\n`,
    'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
    'tests/test.sh':
      testSh ??
      '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
  };
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), content, { mode: rel.endsWith('.sh') ? 0o755 : 0o644 });
  }
  return dir;
}
