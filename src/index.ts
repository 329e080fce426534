/**
 * termgrade's library API: everything the `termgrade` command does, as functions. The CLI is a
 * thin layer over exactly these; a training pipeline or a notebook can call them the same way.
 *
 *   import { loadTask, DockerProvider, oracleAgent, runTrial } from 'termgrade';
 *   const result = await runTrial({ task: await loadTask('tasks/x'), agent: oracleAgent,
 *                                   provider: new DockerProvider(), outDir: 'runs' });
 *
 * Side effects live behind small interfaces (SandboxProvider / Sandbox, Agent, JobStore): a new
 * sandbox backend (a BackendProvider, registered with registerBackend) or agent scaffold is one
 * new implementation of one of them.
 */

// Tasks
export type { Task, TaskEnvironment } from './task/task.js';
export { loadTask, findTaskDirs } from './task/load.js';
export { TaskConfigSchema, type TaskConfig } from './task/schema.js';

// Sandboxes: the contract (what agents need, what grading needs), and what a backend implements (docs/architecture.md)
export type {
  AgentSandbox,
  Sandbox,
  SandboxSnapshot,
  SandboxProvider,
  ProviderCapabilities,
  Shell,
  ExecOptions,
  ExecResult,
  FileEntry,
  CopyOptions,
  FsChange,
  PreparedEnvironment,
  PrepareOptions,
  StartOptions,
  ProviderHealth,
  ImageSource,
  SnapshotOptions,
  SnapshotBounds,
  VerifierCommand,
  VerifierRun,
  VerifierStartOptions,
  ForkOptions,
  ForkedService,
  SandboxFork,
} from './sandbox/sandbox.js';
export {
  ForkError,
  CopyLimitError,
  ScanIncompleteError,
  ScanLimitError,
  DiskLimitError,
  MAX_SCANNED_CHANGES,
  SYSTEM_PATH,
} from './sandbox/sandbox.js';
export {
  completeProvider,
  completeSandbox,
  completeSnapshot,
  type BackendProvider,
  type BackendSandbox,
  type BackendSnapshot,
} from './sandbox/backend.js';
export { execByRun, type RunProcess, type ProcessRun } from './sandbox/exec-wrapper.js';
export { DockerProvider, containerSpec, DROPPED_CAPABILITIES } from './sandbox/docker/provider.js';
export {
  EnginePool,
  PoolEventSchema,
  type PoolEvent,
  type EnginePoolOptions,
  type EngineState,
} from './sandbox/pool/provider.js';
export {
  EngineSpecSchema,
  parseEngineFlag,
  type EngineSpec,
  type EngineSpecInput,
} from './sandbox/pool/engine-spec.js';
export { engineReport, type EngineReport } from './sandbox/pool/inspect.js';
export {
  registerBackend,
  loadBackendModule,
  knownBackends,
  backendNamed,
  createProvider,
  type Backend,
  type BackendOptions,
} from './sandbox/registry.js';
export { acquireSandbox, withSandbox, type AcquireOptions, type SandboxLease } from './sandbox/lease.js';
export { selfcheck, SELF_CHECKS, type CheckResult, type SelfCheckOptions } from './selfcheck/selfcheck.js';

// Agents and models
export type { Agent, AgentContext, AgentOutcome, AgentExitReason, AgentUsage } from './agent/agent.js';
export { oracleAgent, nopAgent } from './agent/oracle.js';
export {
  createAgent,
  loadPrices,
  AGENT_NAMES,
  registerAgent,
  loadAgentModule,
  loadAgentModules,
  knownAgents,
  type AgentPlugin,
  type AgentOptions,
} from './agent/registry.js';
export { parseEnvFile, agentEnvOf } from './agent/env.js';
export { ModelClient, type Completion, type Message } from './model/client.js';
export { preflightModel, preflightModels, type PreflightResult } from './model/preflight.js';
export { ModelConfigSchema, type ModelConfig } from './model/config.js';

// Grading and trials
export { verify } from './verifier/verify.js';
export { findTampering, type Tampering } from './verifier/tampering.js';
export {
  admissionStore,
  ProtectionStore,
  ADMISSION_DIR_ENV,
  DEFAULT_PROTECTION_DIR,
  type AdmissionFound,
} from './verifier/protection-store.js';
export { rewardFindings, rewardFindingsOf, type ConsistencyInput } from './verifier/consistency.js';
export { parseEachRewardFile, parseRewardFiles, type RewardFiles } from './verifier/reward.js';
export { FindingSchema, type Finding } from './verifier/schema.js';
export { collectTests, canonicalTestName } from './verifier/test-report.js';
export { runTrial, newTrialId, type TrialOptions, type TrialTimeouts } from './trial/run.js';
export { TrialResultSchema, type TrialResult, type TrialErrorClass } from './trial/schema.js';
export {
  accountingOf,
  INFRA_ERROR_CLASSES,
  OUTCOME_CLASSES,
  isPassingReward,
  isSuccess,
  type Accounting,
} from './trial/accounting.js';

// Admission
export { checkTasks, type CheckOptions, type CheckEvent } from './check/check.js';
export { judge, ReasonCode } from './check/verdict.js';

// Jobs and the store
export { JobSpecSchema, type JobSpec, type JobSpecInput } from './job/spec.js';
export { readJobFile, parseSpec } from './job/load-spec.js';
export { openJob, storedSpec, type OpenedJob } from './job/job.js';
export { runJob, type JobEvent, type JobSummary, type RunJobOptions } from './job/run-job.js';
export { importHarbor } from './harbor/import-job.js';
export { JobStore, type TrialRow, type Slot } from './store/store.js';

// Measurement and selection (pure, no I/O but loadRecords)
export { loadRecords, loadRecordSet, type RecordSet } from './records/load.js';
export type { StatsRecord } from './records/record.js';
export { configStats, taskRates, type ConfigStats, type TaskRate } from './report/aggregate.js';
export { countByTask } from './records/counts.js';
export { selectTraining, selectValidation } from './select/select.js';
export { pairedCompare, compareRates, type PairedComparison } from './stats/paired.js';
export { passAtK, macroPassAtK, passAtKCurve, fitBetaPrior, type PassAtK, type BetaPrior } from './stats/pass-at-k.js';
export { wilson, jeffreys } from './stats/intervals.js';
export { jaccard, sameModelCeiling } from './stats/overlap.js';
export { GmsEstimator, decide, DEFAULT_ADAPTIVE_RULE, type AdaptiveRule } from './stats/adaptive.js';

// Serving and export (the bridge to RL trainers)
export { startServer, type ServeOptions, type RunningServer } from './serve/server.js';
export { loadServedTasks } from './serve/tasks.js';
export { loadServedModels, parseModelFlag, type ServedModel } from './serve/models.js';
export type { ServedTask } from './serve/sessions.js';
export { exportTrials, collectTrialRows } from './export/trials.js';
export { exportSelection } from './export/tasks.js';

// Errors and helpers
export { TermgradeError, TaskError, CancelledError } from './util/errors.js';
export { makeScrub } from './util/scrub.js';
export { statsJson } from './util/json.js';
export { exportHarborJobs } from './harbor/export-job.js';
export { readHarborJobFile, type HarborJobFile } from './harbor/read-config.js';
export { harborConfigToSpec, isHarborJobConfig, type HarborConversion } from './harbor/job-config.js';
export { synthesize, readSeeds, SeedError, type SynthOptions, type SynthEvent } from './synth/synth.js';
export { funnel, formatFunnel } from './synth/funnel.js';
