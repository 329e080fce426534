import { z } from 'zod';
import { errorMessage } from '../../util/errors.js';
import { AGENT_IMAGE_REPO, IMAGE_REPO } from '../docker/image.js';
import { LABEL_MANAGED, LABEL_OWNER, ownerIsAlive } from '../docker/labels.js';
import { connectEngine } from './engine-connect.js';
import { engineNameOf, type EngineSpec } from './engine-spec.js';

/** One engine as `termgrade engines` reports it. */
export const EngineReportSchema = z.strictObject({
  name: z.string(),
  host: z.string(),
  capacity: z.number().int(),
  labels: z.record(z.string(), z.string()),
  /** Whether it answered; `detail` is its version, or why it did not. */
  ok: z.boolean(),
  detail: z.string(),
  /** termgrade sandboxes on it now, from every process and machine; `leftovers`: those whose owner on this machine is gone. */
  sandboxes: z.number().int(),
  leftovers: z.number().int(),
  /** Task and agent images termgrade built or copied there, by name; `images`: how many. */
  images: z.number().int(),
  imageNames: z.array(z.string()),
});
export type EngineReport = z.infer<typeof EngineReportSchema>;

export const EnginesOutputSchema = z.strictObject({ engines: z.array(EngineReportSchema) });

/** Health, sandboxes and termgrade images of one engine; never throws (an engine that fails says so). */
export async function engineReport(spec: EngineSpec): Promise<EngineReport> {
  const base = { name: engineNameOf(spec), host: spec.host, capacity: spec.capacity, labels: spec.labels };
  let connection: ReturnType<typeof connectEngine> | null = null;
  try {
    connection = connectEngine(spec);
    const docker = connection.docker;
    const v = (await docker.version()) as { Version?: string; ApiVersion?: string };
    const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
    const sandboxes = containers.filter((c) => c.Labels[LABEL_OWNER]);
    const images = (await docker.listImages()).flatMap((i) =>
      (i.RepoTags ?? []).filter((t) => t.startsWith(`${IMAGE_REPO}:`) || t.startsWith(`${AGENT_IMAGE_REPO}:`)),
    );
    return {
      ...base,
      ok: true,
      detail: `Docker Engine ${v.Version ?? '?'} (API ${v.ApiVersion ?? '?'})`,
      sandboxes: sandboxes.length,
      leftovers: sandboxes.filter((c) => !ownerIsAlive(c.Labels[LABEL_OWNER])).length,
      images: images.length,
      imageNames: images.sort(),
    };
  } catch (err) {
    return { ...base, ok: false, detail: errorMessage(err), sandboxes: 0, leftovers: 0, images: 0, imageNames: [] };
  } finally {
    connection?.close();
  }
}
