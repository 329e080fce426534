import type { CreatedAgent } from '../agent/registry.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import type { JobStore } from '../store/store.js';
import type { Task } from '../task/task.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import type { JobEvent } from './events.js';
import type { AgentConfig, JobSpec } from './spec.js';

export interface RunJobOptions {
  spec: JobSpec;
  tasks: Task[];
  store: JobStore;
  provider: SandboxProvider;
  jobDir: string;
  signal?: AbortSignal;
  onEvent?: (e: JobEvent) => void;
  /** Slots to run again although recorded: by error class, or every trial without a reward. */
  retry?: { classes?: string[]; errors?: boolean };
  /** Makes each configuration's agent; default the built-in scaffolds. A custom agent plugs in here. */
  agentFactory?: (config: AgentConfig) => CreatedAgent;
  /**
   * Each task's protected set from admission: trials are scanned against it (recorded on each
   * trial as `protection: admission`); a passing oracle trial records it for a task never checked.
   */
  protection?: ProtectionStore;
}
