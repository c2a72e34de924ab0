"""Record what the code under test tries outside its job: network, writes, hidden reads, processes.

The sandbox (``xeforge_core.sandbox``) is what stops a candidate; this module only *sees* the
attempts, so that the verdict can name them ("candidate line 12 tried to connect to
127.0.0.1:8501: blocked"). It is a Python audit hook (PEP 578, ``sys.addaudithook``), which the
code under test cannot remove; it can still avoid it (a system call through ``ctypes``, or a
child process, is not seen), which is why it is a record and never the boundary.

Recorded, when a frame of the module under test (a file under ``JOB_DIR/src/``) is on the
stack:

* ``network``: ``socket.connect`` / ``sendto`` / ``sendmsg`` (address), ``socket.getaddrinfo``
  (host name);
* ``write``: opening for writing, creating, removing, renaming, linking or changing the mode
  of a path outside the writable directories (``XEFORGE_SANDBOX_WRITABLE``; ``/dev`` excepted)
  or under a hidden one;
* ``read``: opening or listing a path under a hidden directory (``XEFORGE_SANDBOX_HIDDEN``: the
  home directory, the verdict cache, the session workspace, ``.env`` files) that is neither the
  job's nor part of the Python environment shown (``XEFORGE_SANDBOX_VISIBLE``);
* ``process``: starting a program (``subprocess``, ``os.system``, ``os.exec*``, ``os.posix_spawn``)
  directly from the module under test (its actions are confined by the sandbox, not recorded);
* ``signal``: a signal sent to another process or process group (``os.kill``, ``os.killpg``): the
  worker's parent, PID 1 (a signal a process sends itself is a crash of its own, not recorded).

Each attempt is appended at once, as one JSON line, to ``JOB_DIR/escapes.jsonl`` (so it
survives a crash or a hang of the worker), at most ``MAX_PER_KIND`` per kind; the parent
turns them into findings (``xeforge_core.runner``). Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

ESCAPES_FILE = "escapes.jsonl"

#: The kinds of attempt recorded (module docstring).
KINDS = ("network", "write", "read", "process", "signal")

#: Attempts recorded per kind (:data:`KINDS`); later ones are counted only.
MAX_PER_KIND = 20

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_NETWORK = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"}
_PATH_WRITES = {"os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.symlink", "os.link",
                "os.truncate", "os.chmod", "os.chown", "os.utime", "shutil.rmtree", "shutil.copyfile",
                "shutil.copytree", "shutil.move"}
_LISTING = {"os.listdir", "os.scandir", "glob.glob"}
_PROCESS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"}
_SIGNALS = {"os.kill", "os.killpg"}
_SCRATCH_DIRS = {"/tmp", "/var/tmp", "/dev/shm", "/dev"}
_WATCHED = frozenset(_NETWORK | _PATH_WRITES | _LISTING | _PROCESS | _SIGNALS | {"open"})


def _paths(value: str) -> list[str]:
    return [os.path.realpath(p) for p in value.split(os.pathsep) if p]


class EscapeRecorder:
    """The audit hook of one job (``install`` adds it; it cannot be removed afterwards).

    ``job_dir``: the job directory (its ``src/`` holds the module under test).
    ``hidden``/``writable``: absolute real paths (see module docstring).
    """

    def __init__(self, job_dir: Path, *, hidden: list[str], writable: list[str],
                 visible: list[str] = ()) -> None:
        self.src = os.path.realpath(os.path.join(job_dir, "src")) + os.sep
        self.hidden = [h.rstrip(os.sep) for h in hidden]
        self.visible = [v.rstrip(os.sep) for v in visible]
        self.writable = [w.rstrip(os.sep) for w in writable] + ["/dev"]
        # the job's own directories (not the sandbox's private /tmp, which may hold hidden ones)
        self.own = [w for w in self.writable if w not in _SCRATCH_DIRS]
        self.stdlib = tuple(os.path.realpath(p) + os.sep for p in
                            {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
        self.counts: dict[str, int] = {}
        self.busy = False
        self._write = os.write
        self._fd = os.open(os.path.join(job_dir, ESCAPES_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def install(self) -> None:
        """Add the hook to this interpreter."""
        sys.addaudithook(self._hook)

    # -- classification ----------------------------------------------------------------------

    @staticmethod
    def _under(path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    def _private(self, path: str) -> bool:
        """Under a hidden directory, and neither in the job's own directories nor in the
        Python environment that the sandbox shows (a venv under the home directory)."""
        return self._under(path, self.hidden) and not self._under(path, self.own + self.visible)

    def _unwritable(self, path: str) -> bool:
        """Outside the writable directories, or in a read-only one mounted inside them (the
        baseline's outputs, a Python environment under /tmp), or under a hidden one."""
        if self._under(path, self.own):
            return False
        return (self._under(path, self.hidden) or self._under(path, self.visible)
                or not self._under(path, self.writable))

    def _culprit(self, strict: bool) -> tuple[str, int] | None:
        """``(file, line)`` of the module-under-test frame responsible, or ``None``. ``strict``:
        only when it is the nearest frame outside the standard library (a process that the
        compiler starts while the candidate's kernel compiles is not the candidate's)."""
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(self.src):
                return name[len(self.src):], frame.f_lineno
            if strict and not name.startswith(self.stdlib) and not name.startswith("<frozen"):
                return None
            frame = frame.f_back
        return None

    def _classify(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, bool] | None:
        """``(kind, target, strict)`` of an attempt worth recording, or ``None``."""
        if event in _NETWORK:
            if event == "socket.getaddrinfo":
                host = args[0]
                if host in (None, "", b"") or str(host) in ("localhost", "127.0.0.1", "::1"):
                    return None
                return "network", f"look up {host!s}", False
            address = args[1] if len(args) > 1 else None
            if isinstance(address, tuple) and len(address) >= 2:
                return "network", f"{address[0]}:{address[1]}", False
            return "network", str(address), False
        if event in _PROCESS:
            what = args[1] if event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn") else args[0]
            if isinstance(what, (list, tuple)):
                what = " ".join(str(a) for a in what)
            return "process", str(what)[:200], True
        if event in _SIGNALS:
            target, sig = (list(args) + [None, None])[:2]
            if (event == "os.kill" and target in (0, os.getpid())) or (
                    event == "os.killpg" and target in (0, os.getpgrp())):  # itself, or its own process group
                return None
            what = "process group" if event == "os.killpg" else "process"
            return "signal", f"signal {sig} to {what} {target}", False
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if not isinstance(path, (str, bytes, os.PathLike)):
                return None
            real = os.path.realpath(os.fsdecode(path))
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            if writing and self._unwritable(real):
                return "write", real, False
            if not writing and self._private(real):
                return "read", real, False
            return None
        if event in _LISTING:
            path = args[0] if args else None
            if not isinstance(path, (str, bytes, os.PathLike)):
                return None
            real = os.path.realpath(os.fsdecode(path))
            if self._private(real):
                return "read", real, False
            return None
        if event in _PATH_WRITES:
            for arg in args:
                if isinstance(arg, (str, bytes, os.PathLike)):
                    real = os.path.realpath(os.fsdecode(arg))
                    if self._unwritable(real):
                        return "write", real, False
            return None
        return None

    # -- the hook ----------------------------------------------------------------------------

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED or self.busy:
            return
        self.busy = True
        try:
            found = self._classify(event, args)
            if found is None:
                return
            kind, target, strict = found
            culprit = self._culprit(strict)
            if culprit is None:
                return
            n = self.counts.get(kind, 0) + 1
            self.counts[kind] = n
            if n > MAX_PER_KIND:
                return
            file, line = culprit
            record = {"kind": kind, "event": event, "target": target, "file": file, "line": line}
            self._write(self._fd, (json.dumps(record) + "\n").encode("utf-8"))
        except Exception:  # noqa: BLE001 - the record must never break the job
            pass
        finally:
            self.busy = False


def install_from_environment(job_dir: Path) -> EscapeRecorder | None:
    """Install the recorder for ``job_dir`` with the hidden and writable paths the runner put in
    the environment (``XEFORGE_SANDBOX_HIDDEN`` / ``XEFORGE_SANDBOX_WRITABLE``); ``None`` (and
    nothing installed) when the runner set none."""
    hidden = os.environ.get("XEFORGE_SANDBOX_HIDDEN")
    writable = os.environ.get("XEFORGE_SANDBOX_WRITABLE")
    if hidden is None and writable is None:
        return None
    try:
        recorder = EscapeRecorder(job_dir, hidden=_paths(hidden or ""),
                                  writable=_paths(writable or "") + [os.path.realpath(job_dir)],
                                  visible=_paths(os.environ.get("XEFORGE_SANDBOX_VISIBLE", "")))
    except OSError:
        return None
    recorder.install()
    return recorder


def read_attempts(job_dir: Path) -> list[dict[str, Any]]:
    """The attempts recorded in ``job_dir/escapes.jsonl`` (malformed lines skipped)."""
    out: list[dict[str, Any]] = []
    try:
        text = (Path(job_dir) / ESCAPES_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("kind") in KINDS:
            out.append(item)
    return out
