import type { FsChange } from '../sandbox/sandbox.js';

/**
 * Tamper detection: which of an agent's filesystem changes could alter what the verifier runs or
 * reports. Pure: takes the sandbox's change list (and, for two kinds of file, their content) and
 * names the offending paths. The rules aim at the verifier's own machinery, so that ordinary work
 * (new files, edited project files, installed libraries) is never flagged:
 * - programs the verifier and the harness run: any change to an existing program in the system
 *   folders (/bin, /sbin, /usr/bin, /usr/sbin), and shells, Python, pytest, uv, env, the tools
 *   the harness runs and those test scripts decide rewards with, added anywhere on the PATH
 *   (added ones shadow the originals);
 * - the dynamic loader and existing shared libraries (changed or deleted), /etc/ld.so.preload;
 * - Python's standard library (any module added, changed or removed), start-up hooks
 *   (sitecustomize, usercustomize), pytest itself, the packages it loads and its plugin machinery,
 *   .pth files that run code, pytest plugins registered through entry points;
 * - a copy of a core library (libc, libpython, libssl ...) added where the loader would find it;
 * - pytest configuration above the tests (/conftest.py, /pytest.ini ...), which pytest would load.
 */

const SYSTEM_BIN = /^\/(usr\/)?s?bin\/[^/]+$/;
const PATH_BIN = /^\/(usr\/local\/s?bin|root\/\.local\/bin|opt\/[^/]+\/bin)\/[^/]+$/;
// Shells and interpreters, what the harness itself runs (exec wrapper, fresh folders), and the
// tools tests scripts lean on to decide a reward: an added one of these on the PATH shadows the original.
const WATCHED_PROGRAMS = /^(sh|bash|dash|env|sleep|setsid|rm|mkdir|chmod|chown|ls|cp|mv|ln|touch|cat|tar|base64|wc|head|tail|timeout|tee|kill|printf|echo|test|grep|egrep|fgrep|sed|awk|gawk|mawk|cut|tr|sort|uniq|diff|cmp|find|xargs|stat|id|python[0-9.]*|pytest|py\.test|pip[0-9.]*|uv|uvx)$/;
const SHARED_LIBRARY = /^\/(usr\/)?(local\/)?lib(32|64|x32)?\/.*\.so(\.[0-9.]+)?$/;
const PYTHON_HOOK = /\/(sitecustomize|usercustomize)\.py$/;
const PYTEST_PACKAGE = /\/(site|dist)-packages\/(_?pytest|pluggy|iniconfig|packaging|exceptiongroup|tomli|py|_pytest_\w*)(\/|\.py$)|(^|\/)(pytest\.py|_pytest\/)/;
/** Python's standard library (any file of it, not the installed packages beside it). */
const PYTHON_STDLIB_FILE = /^\/(usr\/)?(local\/)?lib\/python3[0-9.]*\/(?!site-packages\/|dist-packages\/)(?!.*\/__pycache__(\/|$)).*\.(py|so)$/;
/** Core libraries a copy placed earlier on the loader's path would stand in for. */
const CORE_LIBRARY = /\/(libc|libm|libdl|libpthread|librt|libutil|libcrypt|libpython3[0-9.]*|libssl|libcrypto|libz|libtinfo|libreadline|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so(\.[0-9.]+)?$/;
const ROOT_PYTEST_CONFIG = /^\/(conftest\.py|pytest\.ini|\.pytest\.ini|pyproject\.toml|tox\.ini|setup\.cfg|setup\.py)$/;
const PTH_FILE = /\/(site|dist)-packages\/[^/]+\.pth$/;
const ENTRY_POINTS = /\/(site|dist)-packages\/[^/]+\.(dist|egg)-info\/entry_points\.txt$/;

export interface Tampering {
  path: string;
  kind: FsChange['kind'];
  why: string;
}

/** Paths whose content decides whether they are tampering (read them, then call `findTampering`). */
export function needsContent(change: FsChange): boolean {
  return change.kind !== 'deleted' && (PTH_FILE.test(change.path) || ENTRY_POINTS.test(change.path));
}

/**
 * The offending changes, with why each is one; `content` holds files `needsContent` asked for;
 * `pathDirs` are the folders on the PATH test.sh runs with (a program added there shadows the
 * system's, wherever the image put the folder: a venv's bin, /usr/local/go/bin).
 */
export function findTampering(changes: FsChange[], content: Map<string, string> = new Map(), pathDirs: string[] = []): Tampering[] {
  const onPath = new Set(pathDirs.filter((d) => d.startsWith('/')).map((d) => d.replace(/\/+$/, '')));
  const found: Tampering[] = [];
  const flag = (c: FsChange, why: string): void => {
    found.push({ path: c.path, kind: c.kind, why });
  };
  for (const c of changes) {
    const base = c.path.slice(c.path.lastIndexOf('/') + 1);
    if (SYSTEM_BIN.test(c.path) && (c.kind !== 'added' || WATCHED_PROGRAMS.test(base))) flag(c, 'a system program');
    else if ((PATH_BIN.test(c.path) || onPath.has(c.path.slice(0, c.path.lastIndexOf('/')))) && WATCHED_PROGRAMS.test(base)) flag(c, 'a program the verifier runs');
    else if (c.path === '/etc/ld.so.preload') flag(c, 'preloads a library into every process');
    else if (SHARED_LIBRARY.test(c.path) && (c.kind !== 'added' || CORE_LIBRARY.test(c.path))) flag(c, c.kind === 'added' ? 'a copy of a core library' : 'a shared library');
    else if (PYTHON_HOOK.test(c.path)) flag(c, 'runs at every Python start');
    else if (PYTEST_PACKAGE.test(c.path)) flag(c, 'pytest itself');
    else if (PYTHON_STDLIB_FILE.test(c.path)) flag(c, "Python's standard library");
    else if (ROOT_PYTEST_CONFIG.test(c.path)) flag(c, 'pytest configuration above /tests');
    else if (PTH_FILE.test(c.path) && c.kind !== 'deleted' && /^\s*import[\s;]/m.test(content.get(c.path) ?? 'import ?')) flag(c, 'a .pth file that runs code');
    else if (ENTRY_POINTS.test(c.path) && c.kind !== 'deleted' && /\[pytest11\]/.test(content.get(c.path) ?? '[pytest11]')) flag(c, 'registers a pytest plugin');
  }
  return found;
}
