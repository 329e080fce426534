"""termgrade's offline verifier toolchain: `uvx [options] pytest ARGS` (and `uv run` of pytest) without a network.

Also `pip install REQ...` (as pip, pip3 and `uv pip install`, for a test.sh that installs its
requirements with pip): succeeds for what the toolchain serves, fails at once naming anything else.

Runs pytest from the toolchain (Debian's python3-pytest) with termgrade's CTRF plugin, in place
of the pinned pytest uvx would download. Requirements (-w) must be ones the toolchain provides
(PROVIDED, written at build time: Debian's packages, or wheels from a folder the user named); any
other, one whose Debian package did not exist (DEBIAN-MISSING), or a tool other than pytest, fails
loudly with exit 2, naming it and the next step, so the grade never silently differs from what the
task asked for. What stood in for each requirement (with Debian's version) is said on stderr.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VALUE_FLAGS = {"-p", "--python", "-w", "--with", "--from", "--with-requirements", "--index-url", "--extra-index-url", "--index", "--default-index", "-i", "--cache-dir", "--directory", "--project", "--config-file", "--with-editable", "--constraints", "-c", "--overrides", "--python-preference", "--color"}
HARMLESS = {"--no-project", "-q", "--quiet", "-v", "--verbose", "--offline", "--no-progress", "--isolated", "--native-tls", "--no-cache", "-n", "--python-preference", "--color", "--cache-dir", "-p", "--python", "-w", "--with"}


def fail(message):
    sys.stderr.write("termgrade offline verifier toolchain: %s\n" % message)
    sys.exit(2)


def requirement_name(req):
    name = re.split(r"[\[<>=!~;@ ]", req.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


NEXT_STEP = (
    "next step: put its wheel (and its dependencies' wheels) in a folder and check with "
    "--verifier-wheels DIR, or check the task online with --network NAME (an isolated network, as run --network)"
)


def read_lines(name):
    try:
        with open(os.path.join(HERE, name)) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


def say(message):
    sys.stderr.write("termgrade offline verifier toolchain: %s\n" % message)


def same_python(asked):
    """Whether `-p ASKED` (3.11, 3.11.2, python3.11, cpython@3.11, 3) names the toolchain's own Python."""
    m = re.search(r"(\d+(?:\.\d+)*)", asked)
    if not m:
        return False
    parts = [int(p) for p in m.group(1).split(".")]
    return list(sys.version_info[:len(parts)]) == parts


def loads(wanted):
    """Each served requirement's module imported here (Debian's name less python3-: numpy, scipy,
    yaml): one that is installed but cannot load (a shared library missing) is said with the way
    forward, so a failing grade names its cause. The tests would import them anyway."""
    import importlib
    import importlib.util
    provided = dict((line.split(" ", 1) + [""])[:2] for line in read_lines("PROVIDED"))
    for r in wanted:
        by = provided.get(requirement_name(r), "")
        module = by[len("python3-"):] if by.startswith("python3-") else None
        if not module or module == "pytest" or not re.match(r"^[a-z_][a-z0-9_]*$", module):
            continue
        try:
            if importlib.util.find_spec(module) is None:
                continue
            importlib.import_module(module)
        except Exception as err:  # an ImportError or OSError from a shared library, whatever its form
            say("%s is installed (Debian %s) but does not load here: %s; next step: put its wheel (and its "
                "dependencies' wheels) in a folder and check with --verifier-wheels DIR, or install it in the "
                "task's Dockerfile (apt-get install %s, or pip install %s)" % (r, by, str(err).splitlines()[0][:200], by, r))


def serve(wanted, python=None):
    """Fails naming what the toolchain does not serve; else says what stands in for each requirement."""
    # Requirement name -> what serves it: a Debian package, or wheel:FILE from the user's folder.
    provided = dict((line.split(" ", 1) + [""])[:2] for line in read_lines("PROVIDED"))
    debian_missing = set(read_lines("DEBIAN-MISSING"))
    versions = dict((line.split(" ", 1) + [""])[:2] for line in read_lines("VERSIONS"))
    missing = [r for r in wanted if requirement_name(r) not in provided]
    if missing:
        fail("requirement(s) %s are not in the toolchain (it provides %s); %s" % (", ".join(missing), ", ".join(sorted(provided)), NEXT_STEP))
    lacking = [r for r in wanted if provided[requirement_name(r)] in debian_missing]
    if lacking:
        fail("requirement(s) %s: Debian has no package %s; %s" % (
            ", ".join(lacking), ", ".join(provided[requirement_name(r)] for r in lacking), NEXT_STEP))
    # What stands in for what was asked, said once per run (check reads these lines).
    if python:
        debian = "Debian python3 %s" % versions.get("python3", sys.version.split()[0])
        if same_python(python):
            say("served python %s with %s" % (python, debian))
        else:
            here = "%d.%d" % sys.version_info[:2]
            say("served python %s with %s (another version: the toolchain has Python %s only)" % (python, debian, here))
    for r in wanted:
        by = provided[requirement_name(r)]
        if by.startswith("wheel:"):
            say("served %s with %s" % (r, by))
        elif by.startswith("python3-"):
            say("served %s with Debian %s %s" % (r, by, versions.get(by, "?")))
        else:
            say("served %s with %s" % (r, by))


# pip install options: those taking a value, and those the toolchain means the same by (kept in
# step with needs.ts's PIP_VALUE_FLAGS and PIP_HARMLESS).
PIP_VALUE_FLAGS = {"-r", "--requirement", "-e", "--editable", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--python", "-p", "--root-user-action", "--progress-bar", "--upgrade-strategy", "--only-binary", "--no-binary", "--timeout", "--retries", "--cache-dir"}
PIP_HARMLESS = {"--no-project", "-q", "--quiet", "-v", "--verbose", "-U", "--upgrade", "--no-cache-dir", "--no-cache", "--break-system-packages", "--user", "--system", "--no-input", "--disable-pip-version-check", "--force-reinstall", "--ignore-installed", "-I", "--no-deps", "--no-warn-script-location", "--pre", "--compile", "--no-compile", "--prefer-binary", "--python", "-p", "--root-user-action", "--progress-bar", "--upgrade-strategy", "--only-binary", "--no-binary", "--timeout", "--retries", "--cache-dir"}


def pip(argv):
    """`pip install REQ...` (or `uv pip install`): succeeds for what the toolchain serves (its
    pytest then sees it), fails at once naming anything else; other pip commands need the network."""
    if argv[:1] in (["--version"], ["-V"]):
        print("pip (termgrade offline verifier toolchain)")
        sys.exit(0)
    i = 0
    while i < len(argv) and argv[i] != "install":
        if not argv[i].startswith("-") or argv[i].partition("=")[0] not in PIP_HARMLESS:
            fail("pip %s needs the network, which this verifier does not have" % " ".join(argv))
        i += 1
    if i >= len(argv):
        fail("pip %s needs the network, which this verifier does not have" % " ".join(argv))
    wanted = []
    i += 1
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            wanted.append(arg)
        else:
            flag, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            value = None
            if flag in PIP_VALUE_FLAGS and not inline:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if flag not in PIP_HARMLESS:
                fail("pip install option %s has no offline equivalent; %s" % (arg if value is None else "%s %s" % (flag, value), NEXT_STEP))
        i += 1
    serve(wanted)
    sys.exit(0)


def main(argv):
    if argv[:1] == ["--termgrade-pip"]:
        pip(argv[1:])
    python = None
    wanted = []
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        flag, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if flag in VALUE_FLAGS:
            value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
            if not inline:
                i += 1
            if flag in ("-w", "--with"):
                wanted.extend(v for v in value.split(",") if v.strip())
            elif flag in ("-p", "--python"):
                python = value
            elif flag not in HARMLESS:
                fail("uvx option %s %s has no offline equivalent" % (flag, value))
        elif flag not in HARMLESS:
            fail("uvx option %s has no offline equivalent" % arg)
        i += 1
    if i + 2 < len(argv) and re.match(r"^python(3(\.\d+)?)?$", argv[i]) and argv[i + 1] == "-m" and argv[i + 2] == "pytest":
        i += 2  # `uvx ... python -m pytest ARGS` is the same run
    elif i >= len(argv) or not re.match(r"^pytest([<>=!~].*)?$", argv[i]):
        fail("only `uvx ... pytest ...` runs offline; asked for %r" % (argv[i] if i < len(argv) else ""))
    serve(wanted, python)
    wheels = os.path.join(os.path.dirname(HERE), "wheels")
    if os.path.isdir(wheels):
        sys.path.insert(0, wheels)
    loads(wanted)
    # uvx's environment as Harbor's uvx gives it: its bin (the toolchain's python3, python, pytest)
    # first on the PATH of the tests and of every process they start.
    env_bin = os.path.join(os.path.dirname(HERE), "env", "bin")
    if os.path.isdir(env_bin):
        os.environ["PATH"] = env_bin + os.pathsep + os.environ.get("PATH", "")
    sys.path.insert(0, HERE)
    import pytest
    import ctrf_report
    sys.argv = ["pytest"] + argv[i + 1:]
    sys.exit(pytest.main(argv[i + 1:], plugins=[ctrf_report]))


if __name__ == "__main__":
    main(sys.argv[1:])
