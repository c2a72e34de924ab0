"""A worker process and its handling: environment, process group, limits, supervision.

Every job gets its own process (``python -m xeforge_core.worker JOB_DIR``) in its own session
and process group, so that a candidate that hangs, crashes, exhausts memory or spawns children
never takes the caller (a CLI, a batch, the Streamlit server) down with it:

* **fresh process, own group**: ``start_new_session=True``; the whole group is killed at the
  end of every job (SIGTERM, then SIGKILL), and the parent checks that nothing of it is left.
  Processes that left the group but still carry the job's token in their environment
  (``XEFORGE_JOB_TOKEN``) are found through ``/proc`` and killed too.
* **hard wall-clock timeout**: a job with no result when ``timeout_s`` expires is a hang
  (``timed_out``). A job whose ``result.json`` exists but whose process does not exit within
  ``exit_grace_s`` is killed and its result kept, with a warning (not a timeout).
* **rlimits** (set by a small launcher that then ``exec``s the worker; ``preexec_fn`` is unsafe
  in a threaded caller): ``RLIMIT_CORE`` 0 (no core dumps of untrusted
  code), ``RLIMIT_CPU`` (a backstop for a spinning orphan should the parent itself die),
  ``RLIMIT_FSIZE`` (no endless output filling the disk), and on cpu ``RLIMIT_AS`` (address
  space). On cuda/xpu the driver reserves huge virtual ranges, so
  ``RLIMIT_AS`` would break the runtime: there the parent polls the resident set size of the
  whole process group from ``/proc`` and kills it over the limit (``oom_killed``).
  ``RLIMIT_NPROC`` is deliberately left alone: Linux counts threads per *user* against it, so
  any value low enough to matter breaks torch's thread pools and the caller's other processes;
  process containment comes from the group kill and the token sweep instead.
* **environment without secrets**: a copy of ``os.environ`` minus every name matching
  ``SECRET_ENV_PATTERNS`` (API keys, tokens, passwords, cloud credentials), with its own
  ``TMPDIR`` and ``TRITON_CACHE_DIR`` inside the job directory, ``PYTHONPATH`` pointing at the
  package root, ``TRITON_INTERPRET=1`` on cpu, ``PYTHONFAULTHANDLER=1``.
* **sandbox** (``xeforge_core.sandbox``, Linux with bubblewrap): no network, a read-only file
  system except the job directory, the user's home, secrets, session repositories and verdict
  cache invisible, no capabilities. Where it cannot be set up the job runs with the process
  isolation above only, and the outcome says so (``WorkerOutcome.isolation`` and a warning);
  ``XEFORGE_REQUIRE_SANDBOX=1`` refuses instead. Escape attempts the worker recorded become
  findings (``annotate``).
* **warm pool** (``xeforge_core.pool``): verification jobs go to a single-use worker started
  ahead of need, with the same limits, environment and sandbox.
* **captured output**: stdout and stderr go to files in the job directory and come back
  truncated to their head and tail (``OUTPUT_LIMIT_BYTES`` in all).
* **progress**: events the worker appends to ``progress.jsonl`` are forwarded to
  ``on_progress`` while the parent waits; ``cancel`` (a ``threading.Event``) kills the group.

``xeforge_core.runner.run_worker`` starts a job with these parts (or hands it to the warm
pool, which uses them too); how a process ended is classified in ``xeforge_core.worker_outcome``:
the parent never trusts the worker to report its own death.

Only the standard library is used here (no torch import in the caller).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xeforge_core import sandbox
from xeforge_core.worker.job import PROGRESS_FILE, RESULT_FILE
from xeforge_core.worker_outcome import WorkerOutcome

#: Environment variable names never passed to a worker (``fnmatch`` patterns, matched against
#: the upper-cased name). One place, so that every spawn path uses the same list. Sources: the
#: naming conventions of the providers' own SDKs and CLIs (OpenAI ``OPENAI_API_KEY``, Anthropic
#: ``ANTHROPIC_API_KEY``, AWS ``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, Hugging Face
#: ``HF_TOKEN``, GitHub ``GITHUB_TOKEN``/``GH_TOKEN``, Azure ``AZURE_CLIENT_SECRET``, Google
#: ``GOOGLE_APPLICATION_CREDENTIALS``) plus the generic ``*_KEY``/``*_TOKEN``/``*_SECRET``/
#: ``*PASSWORD*`` families.
SECRET_ENV_PATTERNS: tuple[str, ...] = (
    # generic families
    "*_API_KEY", "*_APIKEY", "*API_KEY*", "*_ACCESS_KEY*", "*_SECRET_KEY*", "*_PRIVATE_KEY*",
    "*_TOKEN", "*_TOKEN_*", "*TOKEN", "*_SECRET", "*_SECRET_*", "*SECRET",
    "*PASSWORD*", "*PASSWD*", "*_PASS", "*_PAT", "*CREDENTIAL*", "*_AUTH", "*_COOKIE*",
    "*DATABASE_URL*", "*_DSN",
    # LLM and model hubs
    "OPENAI_*", "ANTHROPIC_*", "AZURE_OPENAI_*", "MISTRAL_*", "GROQ_*", "COHERE_*", "GEMINI_*",
    "GOOGLE_API_KEY", "DEEPSEEK_*", "TOGETHER_*", "FIREWORKS_*", "OPENROUTER_*", "REPLICATE_*",
    "PERPLEXITY_*", "XAI_*", "HF_TOKEN", "HF_*TOKEN*", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_*",
    "WANDB_*", "XEFORGE_LLM_*",
    # clouds, forges, registries
    "AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS", "GCP_*", "GCLOUD_*", "CLOUDSDK_*",
    "GITHUB_*", "GH_*", "GITLAB_*", "BITBUCKET_*", "NPM_*", "PYPI_*", "TWINE_*", "DOCKER_*",
    "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KUBECONFIG",
)


#: Total bytes of each captured stream kept in ``WorkerOutcome.stdout``/``stderr`` (half head,
#: half tail); the full files stay in the job directory.
OUTPUT_LIMIT_BYTES = 20_000


#: Seconds a worker may take to exit after writing ``result.json`` before it is killed (and its
#: result kept, with a warning).
DEFAULT_EXIT_GRACE_S = 5.0


#: Largest file a worker may write (``RLIMIT_FSIZE``, bytes): saved baseline outputs of a
#: large variant fit; a candidate printing or writing without end is stopped (``EFBIG`` in
#: Python, which ignores SIGXFSZ; SIGXFSZ in other programs).
DEFAULT_FILE_BYTES = 8 * 2**30


#: Seconds between SIGTERM and SIGKILL when a process group is stopped.
TERM_GRACE_S = 1.0


#: The directory holding the ``xeforge_core`` package (put on the worker's ``PYTHONPATH``).
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


_TOKEN_VAR = "XEFORGE_JOB_TOKEN"


#: The verification worker's module (``python -m xeforge_core.worker JOB_DIR``).
WORKER_MODULE = "xeforge_core.worker"


def is_secret_name(name: str) -> bool:
    """True if the environment variable ``name`` matches one of ``SECRET_ENV_PATTERNS``."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV_PATTERNS)


def scrub_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default ``os.environ``) without any variable named like a secret."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if not is_secret_name(k)}


def worker_environment(job_dir: Path, device_type: str, *, device_index: int | None = None,
                       token: str = "", base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a worker for ``device_type`` (``cpu``/``cuda``/``xpu``) runs with.

    Secrets are removed (``scrub_environment``); ``TMPDIR``, ``TRITON_CACHE_DIR`` and ``HOME``
    point inside ``job_dir`` (so that ``~`` and the caches of torch, Triton and CUDA are the
    job's own; ``PYTHONUSERBASE`` keeps a ``--user`` install importable); ``PYTHONPATH`` starts with the package root; ``TRITON_INTERPRET=1`` on
    cpu (and removed otherwise, so a GPU job really compiles); ``PYTHONFAULTHANDLER=1`` so a
    fatal signal prints the Python stack. With ``device_index`` on cuda/xpu, only that device is
    made visible (``CUDA_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK``, respecting an existing mask),
    and the worker addresses it as index 0.
    """
    env = scrub_environment(base)
    tmp = job_dir / "tmp"
    triton_cache = job_dir / "triton-cache"
    home = job_dir / "home"
    for d in (tmp, triton_cache, home):
        d.mkdir(parents=True, exist_ok=True)
    if "PYTHONUSERBASE" not in env:
        # packages installed with ``pip install --user`` stay importable under the new HOME
        import site

        with contextlib.suppress(Exception):
            if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
                env["PYTHONUSERBASE"] = site.getuserbase()
    env["HOME"] = str(home)
    env["TMPDIR"] = str(tmp)
    env["TEMP"] = str(tmp)
    env["TMP"] = str(tmp)
    env["TRITON_CACHE_DIR"] = str(triton_cache)
    env["PYTHONFAULTHANDLER"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONSTARTUP", None)
    old_path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + old_path if old_path else "")
    env["XEFORGE_DEVICE_TYPE"] = device_type
    if token:
        env[_TOKEN_VAR] = token
    if device_type == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        if device_index is not None:
            var = "CUDA_VISIBLE_DEVICES" if device_type == "cuda" else "ZE_AFFINITY_MASK"
            existing = [p.strip() for p in env.get(var, "").split(",") if p.strip()]
            if existing and device_index < len(existing):
                env[var] = existing[device_index]
            else:
                env[var] = str(device_index)
    return env


# processes (/proc)


@dataclass
class _ProcInfo:
    pid: int
    ppid: int
    pgrp: int
    session: int
    state: str
    rss_pages: int


def _read_stat(pid: int) -> _ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: fields start after the last ')'.
    rest = data[data.rfind(")") + 2:].split()
    try:
        return _ProcInfo(pid=pid, ppid=int(rest[1]), pgrp=int(rest[2]), session=int(rest[3]),
                         state=rest[0], rss_pages=int(rest[21]))
    except (IndexError, ValueError):
        return None


def _all_pids() -> Iterable[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return (int(n) for n in names if n.isdigit())


def group_members(sid: int, *, include_zombies: bool = False) -> list[int]:
    """PIDs of live processes whose session or process group is ``sid`` (zombies excluded
    unless asked: they are already dead and only wait to be reaped)."""
    found = []
    for pid in _all_pids():
        info = _read_stat(pid)
        if info is None or (info.state == "Z" and not include_zombies):
            continue
        if info.session == sid or info.pgrp == sid:
            found.append(pid)
    return found


def _token_holders(token: str) -> list[int]:
    """PIDs of live processes whose initial environment carries this job's token."""
    if not token:
        return []
    needle = f"{_TOKEN_VAR}={token}".encode()
    me = os.getpid()
    found = []
    for pid in _all_pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            info = _read_stat(pid)
            if info is not None and info.state != "Z":
                found.append(pid)
    return found


def _group_rss_bytes(sid: int) -> int:
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    total = 0
    for pid in _all_pids():
        info = _read_stat(pid)
        if info is not None and info.state != "Z" and (info.session == sid or info.pgrp == sid):
            total += info.rss_pages * page
    return total


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_group(sid: int, token: str = "", *, term_grace_s: float = TERM_GRACE_S) -> list[int]:
    """Stop every process of session/group ``sid`` and every process carrying ``token``:
    SIGTERM, wait up to ``term_grace_s`` seconds, then SIGKILL, and wait until they are gone
    (up to 5 s more). Returns the PIDs still alive afterwards (normally empty)."""
    known = set(_token_holders(token))  # environ scan once; cheap stat checks afterwards

    def alive(pid: int) -> bool:
        info = _read_stat(pid)
        return info is not None and info.state != "Z"

    def members() -> list[int]:
        return sorted(set(group_members(sid)) | {p for p in known if alive(p)})

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGTERM)
    _signal_all(members(), signal.SIGTERM)
    deadline = time.monotonic() + term_grace_s
    while time.monotonic() < deadline and members():
        time.sleep(0.02)
    remaining = members()
    if remaining:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(sid, signal.SIGKILL)
        _signal_all(remaining, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            remaining = members()
            if not remaining:
                break
            _signal_all(remaining, signal.SIGKILL)
            time.sleep(0.05)
    if not remaining:
        # A process that picked up the token after the first scan (forked meanwhile).
        late = _token_holders(token)
        if late:
            known.update(late)
            _signal_all(late, signal.SIGKILL)
            time.sleep(0.05)
            remaining = members()
    return remaining


# output capture


def _read_truncated(path: Path, limit: int = OUTPUT_LIMIT_BYTES) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size <= limit:
                return fh.read().decode("utf-8", "replace")
            half = limit // 2
            head = fh.read(half)
            fh.seek(size - half)
            tail = fh.read()
    except OSError:
        return ""
    cut = size - len(head) - len(tail)
    return (head.decode("utf-8", "replace") + f"\n... [{cut} bytes cut] ...\n"
            + tail.decode("utf-8", "replace"))


class _ProgressTail:
    """Reads new complete lines of ``progress.jsonl`` as the worker appends them."""

    def __init__(self, path: Path, callback: Callable[[dict[str, Any]], None] | None) -> None:
        self.path = path
        self.callback = callback
        self.offset = 0
        self.buffer = b""
        self.last_message = ""
        self.queued_since: float | None = None
        self.queued_total = 0.0

    def queued_seconds(self, now: float) -> float:
        """Seconds spent waiting for the device timing lock so far."""
        return self.queued_total + (now - self.queued_since if self.queued_since is not None else 0.0)

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return
        if not chunk:
            return
        self.offset += len(chunk)
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for raw in lines:
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            self.last_message = str(event.get("message", self.last_message))
            kind = event.get("event")
            if kind == "queued" and self.queued_since is None:
                self.queued_since = time.monotonic()
            elif kind == "lock_acquired" and self.queued_since is not None:
                self.queued_total += time.monotonic() - self.queued_since
                self.queued_since = None
            if self.callback is not None:
                # a UI callback must not kill the runner
                with contextlib.suppress(Exception):
                    self.callback(event)


# running


#: Sets the rlimits, then replaces itself with the worker command (``os.execv``). A launcher
#: process instead of ``preexec_fn``, which Python documents as unsafe when the caller has
#: threads (the Streamlit server does): arguments are CPU seconds, address-space bytes and
#: file-size bytes (``0``: unlimited), then ``--`` and the command.
_LAUNCHER = """
import os, resource, sys
cpu, mem, fsize = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cmd = sys.argv[sys.argv.index("--") + 1:]
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
def lower(res, soft, hard):
    _, cur = resource.getrlimit(res)
    if cur != resource.RLIM_INFINITY:
        hard = min(hard, cur)
        soft = min(soft, hard)
    resource.setrlimit(res, (soft, hard))
if cpu > 0:
    lower(resource.RLIMIT_CPU, cpu, cpu + 5)
if mem > 0:
    lower(resource.RLIMIT_AS, mem, mem)
if fsize > 0:
    lower(resource.RLIMIT_FSIZE, fsize, fsize)
os.execv(cmd[0], cmd)
"""


def launcher_argv(command: list[str], *, memory_bytes: int | None, cpu_seconds: int | None,
                  limit_address_space: bool, file_bytes: int | None = None) -> list[str]:
    """``command`` wrapped in the rlimit launcher: ``RLIMIT_CORE`` 0 always, ``RLIMIT_CPU``
    ``cpu_seconds`` (soft; hard 5 s later) when given, ``RLIMIT_AS`` ``memory_bytes`` when
    ``limit_address_space``, ``RLIMIT_FSIZE`` ``file_bytes`` (largest file the worker may
    write, bytes) when given. Limits are only ever lowered, never raised above the caller's."""
    cpu = int(cpu_seconds) if cpu_seconds and cpu_seconds > 0 else 0
    mem = int(memory_bytes) if limit_address_space and memory_bytes and memory_bytes > 0 else 0
    fsize = int(file_bytes) if file_bytes and file_bytes > 0 else 0
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(cpu), str(mem), str(fsize), "--", *command]


def _dump_stack(proc: subprocess.Popen, pid: int | None = None, wait_s: float = 2.0) -> int | None:
    """Make a hung worker print where it is: SIGABRT is one of the signals
    ``PYTHONFAULTHANDLER=1`` handles, so the worker (``pid``, default ``proc``'s) writes every
    thread's Python stack to its stderr before dying (no core: ``RLIMIT_CORE`` is 0). Returns
    ``proc``'s exit status, or ``None`` if it has not exited within ``wait_s`` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid or proc.pid, signal.SIGABRT)
    try:
        return proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _load_result(path: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"result.json could not be read: {exc}"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"result.json is not valid JSON: {exc}"
    if not isinstance(data, dict):
        return None, "result.json does not hold a JSON object"
    return data, ""


@dataclass
class Limits:
    """The limits of one job (see ``run_worker``): seconds, bytes; ``None`` = unlimited."""

    timeout_s: float
    memory_bytes: int | None = None
    cpu_seconds: int | None = None
    file_bytes: int | None = DEFAULT_FILE_BYTES
    exit_grace_s: float = DEFAULT_EXIT_GRACE_S
    queue_limit_s: float = 3600.0
    dump_stack_on_timeout: bool = True
    poll_interval_s: float = 0.05
    limit_address_space: bool = True


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _start_time(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
        return int(data[data.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _worker_pid(sid: int, proc_pid: int, isolation: sandbox.Isolation) -> int:
    """The PID of the worker itself: the process started, or in the sandbox the oldest process
    of the group that is not bwrap."""
    if not isolation.sandboxed:
        return proc_pid
    tool = os.path.realpath(isolation.tool)
    others = [p for p in group_members(sid) if p != proc_pid and os.path.realpath(_exe(p) or "/") != tool]
    return min(others, key=_start_time) if others else proc_pid


def _sandbox_helpers(sid: int, isolation: sandbox.Isolation) -> set[int]:
    if not isolation.sandboxed:
        return set()
    tool = os.path.realpath(isolation.tool)
    return {p for p in group_members(sid) if os.path.realpath(_exe(p) or "/") == tool}


def supervise(proc: subprocess.Popen, *, token: str, job_dir: Path, limits: Limits,
              isolation: sandbox.Isolation,
              on_progress: Callable[[dict[str, Any]], None] | None = None,
              cancel: threading.Event | None = None, start: float | None = None) -> WorkerOutcome:
    """Wait for the worker ``proc`` (the leader of its own session) running the job in
    ``job_dir`` under ``limits``, and return how it ended. The whole group (and every process
    carrying ``token``) is killed afterwards. Used by ``run_worker`` and the warm pool."""
    start = time.monotonic() if start is None else start
    result_path = job_dir / RESULT_FILE
    stdout_path = job_dir / "stdout.txt"
    stderr_path = job_dir / "stderr.txt"
    progress = _ProgressTail(job_dir / PROGRESS_FILE, on_progress)
    warnings: list[str] = []
    memory_bytes = limits.memory_bytes
    sid = proc.pid
    deadline = start + limits.timeout_s
    result_seen_at: float | None = None
    timed_out = cancelled = oom_killed = killed_after_result = False
    peak_rss = 0
    next_rss_check = start
    returncode: int | None = None
    try:
        while True:
            try:
                returncode = proc.wait(timeout=limits.poll_interval_s)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            progress.poll()
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            if result_seen_at is None and result_path.exists():
                result_seen_at = now
            if not limits.limit_address_space and memory_bytes and now >= next_rss_check:
                next_rss_check = now + 0.5
                rss = _group_rss_bytes(sid)
                peak_rss = max(peak_rss, rss)
                if rss > memory_bytes:
                    oom_killed = True
                    break
            if result_seen_at is not None and now - result_seen_at > limits.exit_grace_s:
                killed_after_result = True
                break
            queued = min(progress.queued_seconds(now), limits.queue_limit_s)
            if now >= deadline + queued:
                if result_path.exists():
                    killed_after_result = True
                else:
                    timed_out = True
                    if limits.dump_stack_on_timeout:
                        returncode = _dump_stack(proc, _worker_pid(sid, proc.pid, isolation))
                break
    finally:
        known = {proc.pid} | _sandbox_helpers(sid, isolation)
        if isolation.sandboxed:
            known.add(_worker_pid(sid, proc.pid, isolation))
        stray = [p for p in set(group_members(sid)) | set(_token_holders(token)) if p not in known]
        leftovers = kill_group(sid, token)
        if returncode is None:
            try:
                returncode = proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                returncode = None
                warnings.append(f"worker process {proc.pid} could not be reaped")
        if leftovers:
            warnings.append("processes of the job survived SIGKILL: "
                            + ", ".join(str(p) for p in leftovers))
    seconds = time.monotonic() - start
    progress.poll()
    if isolation.sandboxed and returncode is not None and 128 < returncode <= 128 + 64:
        # bwrap reports a command killed by signal N as exit status 128 + N.
        returncode = -(returncode - 128)

    if stray:
        warnings.append(
            f"the job left {len(stray)} other process(es) running (e.g. a child the candidate "
            "started); they were killed"
        )

    result, result_error = _load_result(result_path)
    if killed_after_result and result is not None:
        warnings.append(
            f"the worker wrote its result but did not exit within {limits.exit_grace_s:g} s "
            "(a thread or exit handler kept it alive); it was killed and its result kept"
        )
    if result_error:
        warnings.append(result_error)

    return WorkerOutcome(
        result=result, returncode=returncode, signal_name=_signal_name(returncode),
        timed_out=timed_out, cancelled=cancelled, oom_killed=oom_killed,
        killed_after_result=killed_after_result,
        stdout=_read_truncated(stdout_path), stderr=_read_truncated(stderr_path),
        stdout_path=str(stdout_path), stderr_path=str(stderr_path), seconds=seconds,
        warnings=warnings, job_dir=str(job_dir), timeout_s=limits.timeout_s, memory_bytes=memory_bytes,
        last_progress=progress.last_message, peak_rss_bytes=peak_rss, result_error=result_error,
        pid=proc.pid, queued_s=progress.queued_seconds(time.monotonic()), file_bytes=limits.file_bytes,
    )
