import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/**
 * termgrade's offline verifier toolchain: Python 3 and pytest from Debian (bookworm's python3 and
 * python3-pytest, plus a few libraries Terminal-Bench 2 verifiers ask uvx for), a CTRF plugin of
 * termgrade's own in place of pytest-json-ctrf, and stand-ins for uvx and uv. Built once per
 * engine as an image from the local debian:bookworm-slim with the build network (Debian's
 * packages are reachable where nothing else is), then copied into a task's graded image under
 * /opt/termgrade-verifier, so test.sh as written grades with no network.
 */
export const TOOLCHAIN_REPO = 'termgrade-verifier-toolchain';
export const TOOLCHAIN_PREFIX = '/opt/termgrade-verifier';
export const TOOLCHAIN_BASE = 'debian:bookworm-slim';

/**
 * What a uvx `-w` requirement may name for the toolchain to serve it, and the Debian package that
 * provides it. pytest and pytest-json-ctrf are the runner and its report (any pinned version is
 * served by Debian's pytest 7.2 and termgrade's CTRF plugin); the others are libraries whose
 * Debian version stands in for the pinned one.
 */
export const PROVIDED: Readonly<Record<string, string>> = {
  pytest: 'python3-pytest',
  'pytest-json-ctrf': '(termgrade ctrf_report plugin)',
  requests: 'python3-requests',
  numpy: 'python3-numpy',
  pyyaml: 'python3-yaml',
};

/**
 * The toolchain's one Python (Debian bookworm's): a `-p` / `--python` asking for it is served as
 * asked; any other version is substituted, and said so.
 */
export const TOOLCHAIN_PYTHON = '3.11';

/**
 * uvx's environment as the tests' subprocesses see it: its `bin` (python, python3, python3.11 and
 * pytest, all the toolchain's) first on their PATH, as uvx puts its environment's `bin` first under
 * Harbor, so a test that runs `python3 /app/x.py` gets the Python that has what uvx served.
 */
export const TOOLCHAIN_ENV_BIN = `${TOOLCHAIN_PREFIX}/env/bin`;

/**
 * The Debian package a Python requirement's name is packaged as (bookworm's naming: python3-NAME,
 * with the exceptions where Debian names the import, not the distribution). Pure.
 */
export function debianPackageOf(name: string): string {
  return DEBIAN_NAMES[name] ?? `python3-${name.replace(/^python-/, '')}`;
}
const DEBIAN_NAMES: Readonly<Record<string, string>> = {
  pyyaml: 'python3-yaml',
  beautifulsoup4: 'python3-bs4',
  'scikit-learn': 'python3-sklearn',
  pillow: 'python3-pil',
  'opencv-python': 'python3-opencv',
  'opencv-python-headless': 'python3-opencv',
  pyzmq: 'python3-zmq',
  attrs: 'python3-attr',
  pyjwt: 'python3-jwt',
  'python-dateutil': 'python3-dateutil',
  'typing-extensions': 'python3-typing-extensions',
  pycryptodome: 'python3-pycryptodome',
  protobuf: 'python3-protobuf',
  markdown: 'python3-markdown',
  pygments: 'python3-pygments',
  'psycopg2-binary': 'python3-psycopg2',
};

/**
 * What a toolchain serves beyond the base set: Debian packages for requirements the base lacks
 * (installed over the build network; one Debian lacks is recorded, not fatal), and wheels from a
 * folder the user names. Each requirement name maps to what serves it.
 */
export interface ToolchainExtras {
  /** Requirement name -> Debian package. */
  debs: Record<string, string>;
  /** Requirement name -> wheel file on the host. */
  wheels: Record<string, string>;
}

const NO_EXTRAS: ToolchainExtras = { debs: {}, wheels: {} };

const FILES_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'files');
const file = (name: string): string => readFileSync(path.join(FILES_DIR, name), 'utf8');

/** Fetchers fail at once with no network: apt's retries wait 1 + 2 + 4 s before it gives up (OFFLINE_FETCH_ENV names them). */
const OFFLINE_FETCH_FILES: ReadonlyArray<{ path: string; content: string }> = [
  {
    path: 'apt-offline.conf',
    content: 'Acquire::Retries "0";\nAcquire::http::Timeout "2";\nAcquire::https::Timeout "2";\n',
  },
  { path: 'wgetrc', content: 'tries = 1\ntimeout = 2\n' },
];

/** The build stage's extra steps: Debian's packages (a missing one recorded), then the wheels unpacked. */
function extraSteps(extras: ToolchainExtras): string[] {
  const debs = [...new Set(Object.values(extras.debs))].sort();
  const steps: string[] = [];
  if (debs.length)
    steps.push(
      `RUN apt-get update && for p in ${debs.join(' ')}; do apt-get install -y --no-install-recommends "$p" || echo "$p" >> /tmp/debian-missing; done; rm -rf /var/lib/apt/lists/*`,
    );
  return steps;
}

/** The toolchain image's build context: a Dockerfile and the files it copies. */
export function toolchainContext(
  extras: ToolchainExtras = NO_EXTRAS,
): Array<{ path: string; content: string | Buffer; mode?: number }> {
  const debs = [...new Set(Object.values(PROVIDED).filter((p) => p.startsWith('python3-')))].sort();
  const root = `${TOOLCHAIN_PREFIX}/root`;
  const wheels = Object.entries(extras.wheels).sort();
  const served = [
    ...Object.entries(PROVIDED),
    ...Object.entries(extras.debs),
    ...wheels.map(([name, f]) => [name, `wheel:${path.basename(f)}`]),
  ].sort();
  const allDebs = [...new Set(['python3', ...debs, ...Object.values(extras.debs)])].sort();
  const dockerfile = [
    `FROM ${TOOLCHAIN_BASE} AS build`,
    `RUN apt-get update && apt-get install -y --no-install-recommends python3 ${debs.join(' ')} && rm -rf /var/lib/apt/lists/*`,
    ...extraSteps(extras),
    // The interpreter, its standard library and Debian's dist-packages, the loader and the shared
    // libraries, under one prefix: it runs there through its own loader, whatever the image holds.
    `RUN set -e; R=${root}; mkdir -p $R/usr/bin $R/usr/lib $R/lib64; ` +
      `cp -L /usr/bin/python3 $R/usr/bin/python3; cp -L /lib64/ld-linux-x86-64.so.2 $R/lib64/; ` +
      `cp -a /usr/lib/x86_64-linux-gnu $R/usr/lib/; cp -a /usr/lib/python3 $R/usr/lib/; ` +
      `for d in /usr/lib/python3.*; do cp -a "$d" $R/usr/lib/; done; ` +
      `mkdir -p ${TOOLCHAIN_PREFIX}/bin ${TOOLCHAIN_PREFIX}/lib ${TOOLCHAIN_ENV_BIN}`,
    // Links out of the prefix (libblas.so.3 -> /etc/alternatives/..., which a task's image lacks)
    // pointed at their target's copy under the prefix (else replaced by the file): BLAS and LAPACK
    // load from the toolchain's own path. Static libraries and Python's build configuration, which
    // nothing run offline uses, are left out.
    `RUN find ${root} -type l -lname '/*' | while read -r l; do t=$(readlink -f "$l"); ` +
      `if [ -e "${root}$t" ]; then ln -sfn "${root}$t" "$l"; elif [ -f "$t" ]; then cp --remove-destination "$t" "$l"; fi; done; ` +
      `find ${root} -name '*.a' -type f -delete; rm -rf ${root}/usr/lib/python3.*/config-*`,
    // Child Pythons started from sys.executable run through the toolchain's loader too.
    `RUN echo "import sys; sys.executable = '${TOOLCHAIN_ENV_BIN}/python3'" > ${root}/usr/lib/python3/dist-packages/termgrade-toolchain.pth`,
    `COPY python3.sh ${TOOLCHAIN_PREFIX}/bin/python3`,
    `COPY uvx.sh ${TOOLCHAIN_PREFIX}/bin/uvx`,
    `COPY uv.sh ${TOOLCHAIN_PREFIX}/bin/uv`,
    // pip install's stand-ins, first on the verifier's PATH when test.sh's pip lines are served (PIP_SHIM_ENV).
    `COPY pip.sh ${TOOLCHAIN_PREFIX}/shims/pip`,
    `COPY pip.sh ${TOOLCHAIN_PREFIX}/shims/pip3`,
    `COPY uv.sh ${TOOLCHAIN_PREFIX}/shims/uv`,
    `COPY pytest.sh ${TOOLCHAIN_PREFIX}/shims/pytest`,
    `COPY python3.sh ${TOOLCHAIN_ENV_BIN}/python3`,
    `COPY pytest.sh ${TOOLCHAIN_ENV_BIN}/pytest`,
    `RUN cd ${TOOLCHAIN_ENV_BIN} && ln -s python3 python && ln -s python3 python${TOOLCHAIN_PYTHON}`,
    `COPY verifier-path.sh ${TOOLCHAIN_PREFIX}/etc/`,
    `COPY uvx.py ctrf_report.py PROVIDED ${TOOLCHAIN_PREFIX}/lib/`,
    `COPY apt-offline.conf wgetrc ${TOOLCHAIN_PREFIX}/etc/`,
    ...(wheels.length
      ? [
          `COPY wheels/ /tmp/wheels/`,
          `RUN mkdir -p ${TOOLCHAIN_PREFIX}/wheels && for w in /tmp/wheels/*.whl; do python3 -m zipfile -e "$w" ${TOOLCHAIN_PREFIX}/wheels/; done`,
          // Ahead of Debian's packages in every toolchain Python, the tests' subprocesses' included.
          `RUN echo "import sys; sys.path.insert(0, '${TOOLCHAIN_PREFIX}/wheels')" > ${root}/usr/lib/python3/dist-packages/termgrade-wheels.pth`,
        ]
      : []),
    // What stood in, with Debian's versions, and what Debian lacked: uvx says both when it runs.
    `RUN touch /tmp/debian-missing && cp /tmp/debian-missing ${TOOLCHAIN_PREFIX}/lib/DEBIAN-MISSING && ` +
      `(dpkg-query -W -f '\${Package} \${Version}\\n' ${allDebs.join(' ')} 2>/dev/null || true) > ${TOOLCHAIN_PREFIX}/lib/VERSIONS`,
    `RUN chmod 755 ${TOOLCHAIN_PREFIX}/bin/* ${TOOLCHAIN_PREFIX}/shims/* ${TOOLCHAIN_ENV_BIN}/* && ${TOOLCHAIN_PREFIX}/bin/python3 -c "import pytest, sys; sys.path.insert(0, '${TOOLCHAIN_PREFIX}/lib'); import ctrf_report, uvx; assert sys.version.startswith('${TOOLCHAIN_PYTHON}.'), sys.version; print('toolchain python', sys.version.split()[0], 'pytest', pytest.__version__)"`,
    'FROM scratch',
    `COPY --from=build ${TOOLCHAIN_PREFIX} ${TOOLCHAIN_PREFIX}`,
    '',
  ].join('\n');
  return [
    { path: 'Dockerfile', content: dockerfile },
    { path: 'python3.sh', content: file('python3.sh'), mode: 0o755 },
    { path: 'uvx.sh', content: file('uvx.sh'), mode: 0o755 },
    { path: 'uv.sh', content: file('uv.sh'), mode: 0o755 },
    { path: 'pip.sh', content: file('pip.sh'), mode: 0o755 },
    { path: 'pytest.sh', content: file('pytest.sh'), mode: 0o755 },
    { path: 'verifier-path.sh', content: file('verifier-path.sh') },
    { path: 'uvx.py', content: file('uvx.py') },
    { path: 'ctrf_report.py', content: file('ctrf_report.py') },
    // Requirement name and what serves it (a Debian package, or wheel:FILE), one a line.
    { path: 'PROVIDED', content: `${served.map(([n, by]) => `${n} ${by}`).join('\n')}\n` },
    ...OFFLINE_FETCH_FILES,
    ...wheels.map(([, f]) => ({ path: `wheels/${path.basename(f)}`, content: readFileSync(f) })),
  ];
}

/**
 * The offline fetch settings alone (the files OFFLINE_FETCH_ENV names, under the toolchain's
 * prefix), for a verifier the toolchain does not serve but that still fetches offline: its apt-get
 * and wget lines then fail at once too. An image of two files, built in a moment with no base.
 */
export function offlineFetchContext(): Array<{ path: string; content: string }> {
  const dockerfile = [
    'FROM scratch',
    `COPY ${OFFLINE_FETCH_FILES.map((f) => f.path).join(' ')} ${TOOLCHAIN_PREFIX}/etc/`,
    '',
  ];
  return [{ path: 'Dockerfile', content: dockerfile.join('\n') }, ...OFFLINE_FETCH_FILES];
}

/** The offline fetch settings' image tag, named by its content as the toolchain's is. */
export function offlineFetchTag(): string {
  const h = createHash('sha256');
  for (const f of offlineFetchContext()) h.update(`${f.path}\0`).update(f.content).update('\0');
  return `${TOOLCHAIN_REPO}:offline-fetch-${h.digest('hex').slice(0, 16)}`;
}

/** The Dockerfile line that puts the offline fetch settings (and nothing else of the toolchain) into a task's image. */
export function offlineFetchLayer(tag: string): string {
  return `COPY --from=${tag} ${TOOLCHAIN_PREFIX}/etc ${TOOLCHAIN_PREFIX}/etc`;
}

/** The toolchain image's tag: named by its recipe (extras and wheels' content included), so a changed one builds anew. */
export function toolchainTag(extras: ToolchainExtras = NO_EXTRAS): string {
  const h = createHash('sha256');
  for (const f of toolchainContext(extras)) h.update(`${f.path}\0`).update(f.content).update('\0');
  return `${TOOLCHAIN_REPO}:${h.digest('hex').slice(0, 16)}`;
}

/** The Dockerfile lines that put the toolchain into a task's image: uvx and uv on the PATH. */
export function toolchainLayer(tag: string): string {
  return [
    `COPY --from=${tag} ${TOOLCHAIN_PREFIX} ${TOOLCHAIN_PREFIX}`,
    `COPY --from=${tag} ${TOOLCHAIN_PREFIX}/bin/uvx /usr/local/bin/uvx`,
    `COPY --from=${tag} ${TOOLCHAIN_PREFIX}/bin/uv /usr/local/bin/uv`,
  ].join('\n');
}

/**
 * The verifier's environment when it grades offline with the toolchain: the fetching lines test.sh
 * keeps (apt-get, wget, pip, uv) give up at their first failure instead of retrying with backoff
 * (TB2's template waited 7 s on apt-get update's retries alone). The task's own [verifier] env wins.
 */
export const OFFLINE_FETCH_ENV: Readonly<Record<string, string>> = {
  APT_CONFIG: `${TOOLCHAIN_PREFIX}/etc/apt-offline.conf`,
  WGETRC: `${TOOLCHAIN_PREFIX}/etc/wgetrc`,
  PIP_RETRIES: '0',
  PIP_TIMEOUT: '2',
  UV_HTTP_RETRIES: '0',
  UV_HTTP_TIMEOUT: '2',
};

/**
 * The verifier's environment when the toolchain serves test.sh's pip installs: bash reads
 * BASH_ENV before test.sh, and the file puts the toolchain's shims (pip, pip3, uv, pytest) first
 * on the PATH, for the verifier alone (the agent's shell never reads it). The task's own env wins.
 */
export const PIP_SHIM_ENV: Readonly<Record<string, string>> = {
  BASH_ENV: `${TOOLCHAIN_PREFIX}/etc/verifier-path.sh`,
};
