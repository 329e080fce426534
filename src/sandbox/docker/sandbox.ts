import { mkdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { ExecOptions, ExecResult, FileEntry, Sandbox, Shell } from '../sandbox.js';
import { DockerShell } from './shell.js';
import { dockerExec } from './exec.js';
import { extractInto, packDir, packEntries } from './tar.js';

const DEFAULT_COPY_OUT_BYTES = 64 * 1024 * 1024;

export class DockerSandbox implements Sandbox {
  private closing: Promise<void> | null = null;
  private helper: Promise<DockerShell> | null = null;

  constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    private readonly onClosed: () => void,
  ) {}

  get id(): string {
    return this.container.id;
  }

  exec(command: string | string[], options?: ExecOptions): Promise<ExecResult> {
    return dockerExec(this.docker, this.container, command, options);
  }

  async shell(): Promise<Shell> {
    const current = this.helper ? await this.helper.catch(() => null) : null;
    if (!current || !current.alive) this.helper = DockerShell.open(this.docker, this.container);
    return this.helper!;
  }

  async copyIn(hostDir: string, destDir: string): Promise<void> {
    await this.container.putArchive(packDir(hostDir, destDir) as unknown as NodeJS.ReadableStream, { path: '/' });
  }

  async putFiles(entries: FileEntry[]): Promise<void> {
    await this.container.putArchive(await packEntries(entries), { path: '/' });
  }

  async copyOut(srcDir: string, hostDir: string, options: { maxBytes?: number } = {}): Promise<void> {
    await mkdir(hostDir, { recursive: true });
    const tar = (await this.container.getArchive({ path: srcDir })) as unknown as Readable;
    await extractInto(tar, hostDir, options.maxBytes ?? DEFAULT_COPY_OUT_BYTES);
  }

  close(): Promise<void> {
    void this.helper?.then((h) => h.close(), () => undefined);
    this.closing ??= this.container
      .remove({ force: true, v: true })
      .catch((err: { statusCode?: number }) => {
        // 404: already gone; 409: removal already in progress. Anything else is left for `cleanup`.
        if (err?.statusCode !== 404 && err?.statusCode !== 409) {
          process.emitWarning(`could not remove container ${this.container.id.slice(0, 12)}: ${String(err)}`);
        }
      })
      .finally(this.onClosed);
    return this.closing;
  }
}
