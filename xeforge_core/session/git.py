"""One session repository's objects and refs, in process, through GitPython.

Objects are read through GitPython's object database (one persistent ``git cat-file --batch``
process per repository) and written as loose objects by GitPython (zlib, the format git writes);
refs are read from their files (loose, else ``packed-refs``) and moved by writing the ref file
through a ``.lock`` file and a rename, as git does, after checking that the ref still holds the
value the caller saw (compare and swap: the single commit point of every session operation).
An approve or a reject therefore costs no subprocess; the only ones left are ``git init`` and
the checkout of the working tree after the branch moves.

Writers hold the session's lock (``Session._locked``); readers need none.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterable
from io import BytesIO
from pathlib import Path

import git
from git.objects.fun import tree_entries_from_data, tree_to_stream
from gitdb.base import IStream
from gitdb.db.loose import LooseObjectDB

from xeforge_core.errors import XeForgeError

ZERO = "0" * 40
_TREE_MODE = 0o040000
_BLOB_MODE = 0o100644
#: Who writes a session's commits and ref updates.
IDENTITY = ("Xe-Forge Studio", "xeforge@localhost")


class GitStoreError(XeForgeError, RuntimeError):
    """A repository operation that failed (a ref moved by someone else, a failed checkout);
    :class:`~xeforge_core.session.Session` reports it as a ``SessionError``."""


def _tz() -> str:
    offset = -(time.altzone if time.daylight and time.localtime().tm_isdst > 0 else time.timezone)
    sign = "+" if offset >= 0 else "-"
    offset = abs(offset)
    return f"{sign}{offset // 3600:02d}{(offset % 3600) // 60:02d}"


class GitStore:
    """Objects and refs of the repository at ``path`` (see the module docstring)."""

    def __init__(self, path: Path, repo: git.Repo) -> None:
        self.path = Path(path)
        self.repo = repo
        self.git_dir = Path(repo.git_dir)

    @classmethod
    def init(cls, path: Path, branch: str) -> GitStore:
        """A new, empty, non-bare repository at ``path`` whose ``HEAD`` is ``branch``, with the
        session's identity, no line-ending conversion and no automatic gc."""
        repo = git.Repo.init(path)
        with repo.config_writer() as cw:
            cw.set_value("user", "name", IDENTITY[0])
            cw.set_value("user", "email", IDENTITY[1])
            cw.set_value("core", "autocrlf", "false")
            cw.set_value("gc", "auto", "0")
        (Path(repo.git_dir) / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
        return cls(path, repo)

    # ------------------------------------------------------------------ objects

    def read_blob(self, commit: str, path: str) -> bytes:
        """The bytes of ``path`` in ``commit``'s tree. Raises ``KeyError`` when it has none."""
        blob = self.repo.commit(commit).tree / path
        return blob.data_stream.read()

    def tree_files(self, commit: str) -> dict[str, bytes]:
        """Every file of ``commit``'s tree: ``{path: bytes}``."""
        return {b.path: b.data_stream.read() for b in self.repo.commit(commit).tree.traverse() if b.type == "blob"}

    def tree_of(self, commit: str) -> str:
        """The tree sha of ``commit``."""
        return self.repo.commit(commit).tree.hexsha

    def message(self, commit: str) -> str:
        """The commit message of ``commit`` (UTF-8 text)."""
        obj = self.repo.commit(commit)
        return obj.message if isinstance(obj.message, str) else obj.message.decode("utf-8", "replace")

    def commit_time(self, commit: str) -> float:
        """When ``commit`` was made, in unix seconds."""
        return float(self.repo.commit(commit).committed_date)

    def first_parent_chain(self, commit: str) -> list[str]:
        """``commit`` and its first parents back to the root, oldest first."""
        chain: list[str] = []
        cur: git.Commit | None = self.repo.commit(commit)
        while cur is not None:
            chain.append(cur.hexsha)
            cur = cur.parents[0] if cur.parents else None
        chain.reverse()
        return chain

    def has_commit(self, sha: str) -> bool:
        """Whether the full sha ``sha`` names a commit of this repository."""
        try:
            return self.repo.commit(sha).type == "commit"
        except (ValueError, git.BadName, git.BadObject):
            return False

    def _store(self, kind: bytes, data: bytes) -> bytes:
        """Write one object as a loose object, in process (GitPython's own ``store`` would run
        ``git hash-object``); returns its binary sha."""
        return LooseObjectDB.store(self.repo.odb, IStream(kind, len(data), BytesIO(data))).binsha

    def write_blob(self, data: bytes) -> bytes:
        """Store a blob; returns its binary sha."""
        return self._store(b"blob", data)

    def write_tree(self, base: str | None, files: dict[str, bytes], remove: Iterable[str] = ()) -> str:
        """A tree: ``base`` (a tree sha, or ``None`` for an empty one) with ``files`` written
        (``{path: bytes}``, directories created as needed) and ``remove`` paths taken out.
        Returns its sha."""
        edits: dict[str, bytes | None] = {p: self.write_blob(d) for p, d in files.items()}
        edits.update({p: None for p in remove})
        return self._edit_tree(base, edits).hex()

    def _edit_tree(self, base: str | None, edits: dict[str, bytes | None]) -> bytes:
        entries: dict[str, tuple[bytes, int]] = {}
        if base is not None:
            for binsha, mode, name in tree_entries_from_data(self.repo.odb.stream(bytes.fromhex(base)).read()):
                entries[name] = (binsha, mode)
        here = {p: v for p, v in edits.items() if "/" not in p}
        below: dict[str, dict[str, bytes | None]] = {}
        for p, v in edits.items():
            if "/" in p:
                head, rest = p.split("/", 1)
                below.setdefault(head, {})[rest] = v
        for name, binsha in here.items():
            if binsha is None:
                entries.pop(name, None)
            else:
                entries[name] = (binsha, _BLOB_MODE)
        for name, sub in below.items():
            old = entries.get(name)
            sub_base = old[0].hex() if old is not None and old[1] == _TREE_MODE else None
            new = self._edit_tree(sub_base, sub)
            if new == self._empty_tree:
                entries.pop(name, None)
            else:
                entries[name] = (new, _TREE_MODE)
        # git orders entries by name, a tree's name compared as if it ended with "/"
        ordered = sorted(entries.items(), key=lambda kv: kv[0].encode() + (b"/" if kv[1][1] == _TREE_MODE else b""))
        stream = BytesIO()
        tree_to_stream([(sha, mode, name) for name, (sha, mode) in ordered], stream.write)
        return self._store(b"tree", stream.getvalue())

    @property
    def _empty_tree(self) -> bytes:
        return bytes.fromhex("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

    def write_commit(self, tree: str, parents: list[str], message: str) -> str:
        """A commit of ``tree`` with ``parents`` and ``message`` (author and committer:
        :data:`IDENTITY`, now). Returns its sha."""
        stamp = f"{int(time.time())} {_tz()}"
        who = f"{IDENTITY[0]} <{IDENTITY[1]}> {stamp}"
        lines = [f"tree {tree}"] + [f"parent {p}" for p in parents] + [f"author {who}", f"committer {who}"]
        return self._store(b"commit", ("\n".join(lines) + "\n\n" + message).encode("utf-8")).hex()

    # ------------------------------------------------------------------ refs

    def _packed(self) -> dict[str, str]:
        packed = self.git_dir / "packed-refs"
        out: dict[str, str] = {}
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line and line[0] not in "#^":
                    sha, _, name = line.partition(" ")
                    out[name.strip()] = sha
        return out

    def ref(self, name: str) -> str | None:
        """The sha ``name`` (``refs/...``) points to, or ``None`` when there is no such ref."""
        loose = self.git_dir / name
        if loose.is_file():
            text = loose.read_text().strip()
            if text.startswith("ref: "):
                return self.ref(text[5:])
            return text or None
        return self._packed().get(name)

    def refs(self, prefix: str) -> dict[str, str]:
        """``{ref name: sha}`` of every ref under ``prefix`` (e.g. ``refs/candidates/``)."""
        out = {n: s for n, s in self._packed().items() if n.startswith(prefix)}
        root = self.git_dir / prefix
        if root.is_dir():
            for path in root.rglob("*"):
                if path.is_file() and not path.name.endswith(".lock"):
                    name = path.relative_to(self.git_dir).as_posix()
                    out[name] = path.read_text().strip()
        return out

    def set_ref(self, name: str, new: str, old: str | None) -> None:
        """Point ``name`` at ``new`` if it still points at ``old`` (``None``: it must not exist
        yet). Raises :class:`GitStoreError` naming both values otherwise."""
        path = self.git_dir / name
        lock = path.with_name(path.name + ".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise GitStoreError(f"{name} is being updated by another process ({lock} exists)") from None
        try:
            current = self.ref(name)
            if current != old:
                raise GitStoreError(f"{name} moved: expected {old or 'no ref'}, found {current or 'no ref'}")
            os.write(fd, (new + "\n").encode())
            os.close(fd)
            fd = -1
            os.replace(lock, path)
        finally:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
        if name.startswith("refs/heads/"):
            self._log_ref(name, old or ZERO, new)

    def _log_ref(self, name: str, old: str, new: str) -> None:
        """Append to ``logs/<ref>`` as ``git update-ref -m`` does, so ``git reflog`` shows it."""
        log = self.git_dir / "logs" / name
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{old} {new} {IDENTITY[0]} <{IDENTITY[1]}> {int(time.time())} {_tz()}\txeforge\n")

    # ------------------------------------------------------------------ working tree

    def checkout_head(self) -> None:
        """Make the working tree and the index show ``HEAD`` (``git read-tree -u --reset``)."""
        env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1")
        proc = subprocess.run(["git", "read-tree", "-u", "--reset", "HEAD"], cwd=self.path, capture_output=True,
                              env=env, check=False)
        if proc.returncode != 0:
            raise GitStoreError(f"git read-tree failed: {proc.stderr.decode(errors='replace').strip()}")
