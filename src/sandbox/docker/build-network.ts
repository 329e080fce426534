import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { TermgradeError } from '../../util/errors.js';

/**
 * The network a task's image build runs on. A build runs the task's own RUN steps (untrusted by
 * premise), so it runs on the engine's default network unless the operator names another:
 *   - `default`: the engine's default network (its bridge: the outside world, not the host's loopback);
 *   - `none`: no network at all (RUN steps that fetch packages fail);
 *   - `host`: the host's own network namespace, its loopback services included (a `serve` or
 *     `view` without a token, a Docker API on tcp): only where the operator asks for it;
 *   - any other name: a network made on the engine (`docker network create ...`).
 * The setting comes from `--build-network`, else TERMGRADE_BUILD_NETWORK, else the machine's engine
 * settings file (ENGINE_SETTINGS_FILE; scripts/setup.sh writes one on engines without a bridge).
 */
export const BuildNetworkNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'a Docker network name: letters, digits, "_", "." and "-", at most 128');

/** The machine's engine settings: what scripts/setup.sh writes, and why. */
export const EngineSettingsSchema = z.strictObject({
  build_network: BuildNetworkNameSchema.optional(),
  /** Why the setting is what it is (setup.sh says: this engine has no bridge). */
  reason: z.string().optional(),
});

/** Where the engine settings are read from; TERMGRADE_ENGINE_SETTINGS names another file. */
export const ENGINE_SETTINGS_FILE = '/etc/termgrade/engine.json';

export interface BuildNetwork {
  /** `default`, `host`, `none` or a network's name. */
  name: string;
  /** Where the setting came from, as the build log and errors say it. */
  from: string;
}

function settingsFile(): BuildNetwork | null {
  const file = process.env.TERMGRADE_ENGINE_SETTINGS || ENGINE_SETTINGS_FILE;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new TermgradeError('bad_input', `${file}: cannot read the engine settings: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: not JSON: ${(err as Error).message}`);
  }
  const parsed = EngineSettingsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TermgradeError('bad_input', `${file}: ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  return parsed.data.build_network ? { name: parsed.data.build_network, from: file } : null;
}

/** The build network in force: the flag's, else the environment's, else the settings file's, else the engine default. */
export function resolveBuildNetwork(flag?: string): BuildNetwork {
  const given = (name: string, from: string): BuildNetwork => {
    const parsed = BuildNetworkNameSchema.safeParse(name);
    if (!parsed.success)
      throw new TermgradeError('bad_input', `${from}: "${name}" is not ${parsed.error.issues[0]!.message}`);
    return { name, from };
  };
  if (flag !== undefined) return given(flag, '--build-network');
  const env = process.env.TERMGRADE_BUILD_NETWORK;
  if (env) return given(env, 'TERMGRADE_BUILD_NETWORK');
  return settingsFile() ?? { name: 'default', from: 'the engine default' };
}

/**
 * What the engine's build request takes: BuildKit in the engine knows only default, host and none;
 * a named network needs the legacy builder.
 */
export function buildRequestOf(network: BuildNetwork): { networkmode?: string; legacyOnly: boolean } {
  if (network.name === 'default') return { legacyOnly: false };
  return { networkmode: network.name, legacyOnly: network.name !== 'host' && network.name !== 'none' };
}

/** A build failure the network setting explains: an engine with no bridge has no default network. */
export function networkHint(message: string, network: BuildNetwork): string {
  if (network.name === 'default' && /network bridge not found|bridge.*not found/i.test(message)) {
    return `; this engine has no default network (dockerd --bridge=none): name a build network with --build-network, TERMGRADE_BUILD_NETWORK or ${ENGINE_SETTINGS_FILE} (scripts/setup.sh writes "host" there on such engines)`;
  }
  return '';
}
