import type { SandboxProvider } from '../sandbox/sandbox.js';
import type { Curriculum, CurriculumConfig } from './curriculum.js';
import type { EpisodeRunner } from './episodes.js';
import type { GroupBook } from './groups.js';
import type { ServedBy, SessionManager } from './sessions.js';

/** What the route modules of `serve` share: the server's parts, built once by startServer. */
export interface ServeContext {
  provider: SandboxProvider;
  sessions: SessionManager;
  episodes: EpisodeRunner;
  groups: GroupBook;
  curriculum: Curriculum;
  config: CurriculumConfig;
  /** Grades appended to grades.jsonl so far. */
  recorded(): number;
  /** The curriculum's key for a policy label (a missing label is "unlabelled"). */
  policyOf(label: string | null): string;
  /** A task by name, or the curriculum's pick for `"auto"` (404 when it has none to give). */
  resolveTask(
    task: string,
    split: 'train' | 'validation' | undefined,
    policy: string | null,
  ): { task: string; servedBy: ServedBy };
}
