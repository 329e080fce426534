import type { ResourceLimits, StepConfig, TaskConfig } from './schema.js';

/**
 * Where a task's environment comes from: a Dockerfile build context, or an image it names. A task
 * with both (every Terminal-Bench 2 task) keeps both: as in Harbor, the named prebuilt image is
 * used when it can be had, and the Dockerfile is built otherwise or when a build is forced.
 */
export type TaskEnvironment =
  | { kind: 'dockerfile'; contextDir: string; contentHash: string; prebuilt: string | null }
  | { kind: 'image'; image: string };

/** A loaded, validated task folder (Harbor / Terminal-Bench 2 layout). */
export interface Task {
  /** Absolute path of the task folder. */
  path: string;
  /** `[task].name` when given, else the folder name. */
  name: string;
  config: TaskConfig;
  instruction: string;
  environment: TaskEnvironment;
  limits: ResourceLimits;
  /** solution/ folder, when the task ships a reference solution (solve.sh inside). */
  solutionDir: string | null;
  testsDir: string;
  /** sha256 of the whole task folder's content: a trial records it so results stay tied to what ran. */
  checksum: string;
  /** What loading noticed but kept (unknown task.toml sections and keys, with the name meant): for the commands to print. */
  warnings?: string[];
  /**
   * Dockerfile lines that put an offline verifier toolchain into the graded image (set by
   * `withVerifierToolchain` when test.sh would fetch its tools from the network and the toolchain
   * serves what it asks for); built into the image with the agent's layer.
   */
  verifierLayer?: {
    lines: string;
    toolchainImage: string;
    /**
     * The toolchain image's build context (its Dockerfile and the files it copies), made when a
     * backend builds `toolchainImage`: the recipe comes to the backend with the layer, so no
     * backend imports the verifier (the recipe is src/verifier/toolchain's).
     */
    recipe: () => Array<{ path: string; content: string | Buffer; mode?: number }>;
  };
  /** A multi-step task's steps, in order; absent or empty for a single-step task. */
  steps?: TaskStep[];
  /** `[task].version` (schema 1.4), null when not given. */
  version?: string | null;
  /** The dataset.toml in the task's parent folder, when there is one. */
  dataset?: TaskDataset | null;
}

/** One step of a multi-step task (Harbor's `[[steps]]` with its steps/<name>/ folder). */
export interface TaskStep {
  name: string;
  config: StepConfig;
  /** steps/<name>/instruction.md: what the agent is told for this step. */
  instruction: string;
  /** Copied to /tests in order, a later one's files over an earlier one's: the task's tests/, then the step's. */
  testsDirs: string[];
  /** steps/<name>/solution/ when it has solve.sh, else the task's solution/ (the oracle's). */
  solutionDir: string | null;
}

/** Where a task comes from, as the dataset.toml beside it says (name and version), recorded on trials. */
export interface TaskDataset {
  name: string | null;
  version: string | null;
}
