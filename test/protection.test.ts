import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  boundPorts,
  librariesUsed,
  parseLdCache,
  protectedSet,
  tracedPaths,
  type ProtectionRecord,
} from '../src/verifier/protection.js';
import { findTampering } from '../src/verifier/tampering.js';

const LOG = [
  '12269 execve("/bin/bash", ["/bin/bash", "/tests/test.sh"], 0x55 /* 4 vars */) = 0',
  '12269 openat(AT_FDCWD</>, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache>',
  '12269 openat(AT_FDCWD</>, "/lib/x86_64-linux-gnu/libtinfo.so.6", O_RDONLY|O_CLOEXEC) = 3</usr/lib/x86_64-linux-gnu/libtinfo.so.6.4>',
  '12269 newfstatat(3</usr/lib/x86_64-linux-gnu/libtinfo.so.6.4>, "", {st_mode=S_IFREG|0644, ...}, AT_EMPTY_PATH) = 0',
  '12270 newfstatat(AT_FDCWD</tests>, "conftest.py", 0x7ffd, 0) = -1 ENOENT (No such file or directory)',
  '12270 newfstatat(AT_FDCWD</>, "/conftest.py", 0x7ffd, 0) = -1 ENOENT (No such file or directory)',
  '12270 openat(3</usr/lib/python3/dist-packages>, "../../python3.11/./os.py", O_RDONLY) = 4</usr/lib/python3.11/os.py>',
  '12270 getdents64(5</usr/lib/python3/dist-packages>, 0x55 /* 40 entries */, 32768) = 1480',
  '12271 access("/usr/local/bin/grep", X_OK) = -1 ENOENT (No such file or directory)',
  '12271 +++ exited with 0 +++',
].join('\n');

const record = (over: Partial<ProtectionRecord> = {}): ProtectionRecord => ({
  schemaVersion: 1,
  task: 't',
  checksum: 'c',
  recordedAt: '2026-12-01T00:00:00Z',
  accessed: tracedPaths(LOG),
  outputs: ['/app', '/app/out.txt'],
  libraries: {},
  ...over,
});

describe('protected set from a trace', () => {
  it('names what test.sh executed, opened, listed and looked up without finding, relative paths resolved', () => {
    const paths = tracedPaths(LOG);
    for (const p of [
      '/bin/bash',
      '/etc/ld.so.cache',
      '/lib/x86_64-linux-gnu/libtinfo.so.6',
      '/usr/lib/x86_64-linux-gnu/libtinfo.so.6.4',
      '/tests/conftest.py',
      '/conftest.py',
      '/usr/lib/python3.11/os.py',
      '/usr/lib/python3/dist-packages',
      '/usr/local/bin/grep',
    ]) {
      assert.ok(paths.includes(p), `${p} in ${paths.join(' ')}`);
    }
    assert.ok(!paths.some((p) => p.includes('..')), 'normalised');
  });

  it('flags a change to any path the verifier touched, and none to the outputs, the harness folders or folders', () => {
    const r = record();
    assert.ok(!protectedSet(r).has('/tests/conftest.py'), 'the harness makes /tests afresh');
    const found = findTampering(
      [
        { path: '/conftest.py', kind: 'added' },
        { path: '/usr/local/bin/grep', kind: 'added' },
        { path: '/usr/lib/python3.11/os.py', kind: 'changed' },
        { path: '/usr/lib/python3.11/__pycache__/os.cpython-311.pyc', kind: 'changed' },
        { path: '/app/out.txt', kind: 'changed' },
        { path: '/usr/lib/python3/dist-packages', kind: 'changed' },
        { path: '/usr/lib/python3/dist-packages/requests', kind: 'added' },
        { path: '/usr/lib/python3/dist-packages/requests/api.py', kind: 'added' },
        { path: '/app/notes.md', kind: 'added' },
      ],
      { protection: r },
    ).map((t) => t.path);
    assert.deepEqual(found.sort(), [
      '/conftest.py',
      '/usr/lib/python3.11/__pycache__/os.cpython-311.pyc',
      '/usr/lib/python3.11/os.py',
      '/usr/local/bin/grep',
    ]);
  });
});

describe('the loader cache', () => {
  const cache = existsSync('/etc/ld.so.cache') ? readFileSync('/etc/ld.so.cache') : null;

  it("is read as glibc writes it (this machine's own cache)", { skip: cache === null }, () => {
    const map = parseLdCache(cache!);
    assert.ok(map && map.size > 10, 'entries');
    assert.match(map.get('libc.so.6') ?? '', /\/libc\.so\.6$/);
    assert.equal(parseLdCache(cache!.subarray(0, 60)), null, 'a cut cache is not read');
  });

  it(
    'is tampering when it sends a library the verifier loaded elsewhere, or cannot be read; an honest install is not',
    { skip: cache === null },
    () => {
      const map = parseLdCache(cache!)!;
      const libs = librariesUsed(map, ['/lib/x86_64-linux-gnu/libc.so.6']);
      assert.deepEqual(Object.keys(libs), ['libc.so.6']);
      const change = [{ path: '/etc/ld.so.cache', kind: 'changed' as const }];
      assert.deepEqual(
        findTampering(change, {
          content: new Map([['/etc/ld.so.cache', cache!]]),
          protection: record({ libraries: libs }),
        }),
        [],
      );
      const moved = findTampering(change, {
        content: new Map([['/etc/ld.so.cache', cache!]]),
        protection: record({ libraries: { 'libc.so.6': '/opt/evil/libc.so.6' } }),
      });
      assert.match(moved[0]?.why ?? '', /sends libc\.so\.6/);
      assert.match(findTampering(change, { content: new Map() })[0]?.why ?? '', /could not be read whole/);
    },
  );
});

describe('fixed rules for libraries loaded by configuration', () => {
  it('flags NSS and loader configuration and any added NSS module', () => {
    const found = findTampering([
      { path: '/etc/nsswitch.conf', kind: 'changed' },
      { path: '/etc/ld.so.conf.d/zz.conf', kind: 'added' },
      { path: '/usr/lib/x86_64-linux-gnu/libnss_evil.so.2', kind: 'added' },
    ]).map((t) => t.why);
    assert.equal(found.length, 3, found.join('; '));
  });
});

describe('ports the tests bind, from the trace', () => {
  it('keeps successful binds of a port (IPv4, IPv6, a call split by another process), not port 0, a failed bind or a unix socket', () => {
    const log = [
      '31 bind(3<socket:[92834]>, {sa_family=AF_INET, sin_port=htons(9555), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
      '31 bind(4<socket:[92835]>, {sa_family=AF_INET6, sin6_port=htons(9556), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
      '31 bind(5<socket:[92837]>, {sa_family=AF_INET, sin_port=htons(0), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
      '31 bind(6<socket:[92839]>, {sa_family=AF_UNIX, sun_path=@"abc"}, 6) = 0',
      '31 bind(7<socket:[92841]>, {sa_family=AF_INET, sin_port=htons(9557), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EADDRINUSE (Address already in use)',
      '40 bind(3<socket:[1]>, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("0.0.0.0")}, 16 <unfinished ...>',
      '41 bind(3<socket:[2]>, {sa_family=AF_INET, sin_port=htons(8081), sin_addr=inet_addr("0.0.0.0")}, 16 <unfinished ...>',
      '40 <... bind resumed>) = 0',
      '41 <... bind resumed>) = -1 EADDRINUSE (Address already in use)',
    ].join('\n');
    assert.deepEqual(boundPorts(log), [8080, 9555, 9556]);
  });
});
