"""The warm `gates audit`: the stored report of an unchanged state, with the standard library only.

The full audit imports click, pydantic, the evaluators and the reporters (about
340 modules). When nothing it reads has changed since it last ran, its report
is the same; so the full path, after printing a report, stores it with a
fingerprint of *everything* the audit reads, and a later `gates audit` with the
same arguments recomputes that fingerprint here (this module imports only the
standard library) and prints the stored report when it matches. Anything
missing, unreadable, ineligible or different falls back to the full path.

The fingerprint (:func:`fingerprint`) covers:

* the request: the arguments, the current folder, stdout's encoding and
  whether it is a terminal, today's UTC date (waivers expire), and the
  environment variables the audit or git reads (``GATES_*``, ``GIT_*``, the
  locale, ``HOME``, ``XDG_*``, ``PATH``, ...);
* gates itself: the interpreter, and the stat key of every file of the
  installed ``gates`` package and of every folder on ``sys.path`` (installing
  or removing a package changes its site-packages folder);
* the workspace: the key (mode, inode, size, mtime, ctime) of every file and
  symlink under the git worktree that holds it (receipts, subjects, contracts,
  waivers, gates.toml, the source tree the freeze hashes), ``.git`` excepted,
  the name of every folder and the worktree's device; a symlink also
  contributes its target's stat key, and a symlinked folder makes the request
  ineligible. The freeze script's answer leaves out
  what is under the governance folders, which its check never reads (the full path names
  them, :func:`unread_folders`; the folders themselves are still named);
* git's state: HEAD, the index, every ref (loose and packed: the policy ref,
  the pin, the branches), the repository's and the user's git configuration
  and exclude files;
* the trust file (``--trust`` / ``GATES_TRUST``): its bytes and the stat keys
  of the key files it names.

A report is stored only when the audit exited 0 or 1, wrote nothing on
stderr, named no external evidence root, ran with caching on, and the
fingerprint taken before the audit equals the one taken after it with no
file changed within the racy window (a write in the same clock tick as the
one seen could keep every stat field). The store lives in gates' cache folder
(outside every workspace; the sandbox never mounts it) and is replaced
atomically, and printed as the bytes the full path wrote (:meth:`Stored.print_body`).
See docs/trust.md ("The warm audit").
"""

from __future__ import annotations

# `struct` is a module over `_struct`: 1 ms more to import
import _struct
import os
import stat
import sys
import time

try:  # a builtin extension: hashlib would load OpenSSL's libcrypto first (5 to 8 ms here)
    from _blake2 import blake2b as _new_hash
except ImportError:  # an interpreter built without it
    from hashlib import blake2b as _new_hash

# the walk in C (gates/_walk.c), built at install where a C compiler is; where the file
# system's encoding is not UTF-8 with surrogateescape, its bytes would not be the rows' own
_native_tree_rows: (
    Callable[[bytes, bytes, bytes, tuple[bytes, ...], bool], tuple[bytes, int]] | None
)
try:
    from gates._walk import tree_rows as _native_tree_rows
except ImportError:
    _native_tree_rows = None
if (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()) != ("utf-8", "surrogateescape"):
    _native_tree_rows = None

# `typing` imports `re` (and with it enum), contextlib imports collections and functools:
# the warm path needs none of them at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO

STORE_VERSION = b"gates-fastpath 4"
#: The formats whose whole output is stdout (`github` also appends to the job summary file).
FORMATS = ("text", "json", "junit")
RACY_WINDOW_NS = 2_000_000_000
_S_ISDIR = stat.S_ISDIR
_S_ISLNK = stat.S_ISLNK
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_ENV_PREFIXES = ("GATES_", "GIT_", "LC_", "XDG_", "PYTHON", "GITHUB_", "PRE_COMMIT")
_ENV_NAMES = frozenset(
    ("HOME", "LANG", "LANGUAGE", "TZ", "PATH", "TERM", "NO_COLOR", "FORCE_COLOR", "CI", "COLUMNS")
)
_GIT_FILES = ("HEAD", "index", "config", "config.worktree", "commondir", "shallow")
_GIT_COMMON_FILES = (
    "packed-refs",
    "config",
    "info/exclude",
    "info/grafts",
    "shallow",
    "objects/info/alternates",
)
#: What pre-commit sets at pre-push (gates/commands/freeze_script.py): the freeze script
#: then judges the pushed commit, which the warm path does not answer for.
_PUSHED_REF_VARIABLES = ("PRE_COMMIT_TO_REF", "PRE_COMMIT_LOCAL_BRANCH")
#: The options before `audit` that take a value, and what each sets.
_GLOBAL_OPTIONS = {"-C": "directory", "--policy-ref": "policy_ref", "--trust": "trust"}


class IneligibleError(Exception):
    """This request is not answered from a stored report (the full path runs, stores nothing)."""


Request = tuple[tuple[str, ...], str, str | None, str | None, str]
#: Folders of the worktree (relative to it) that the fingerprint names but does not enter.
Skip = tuple[str, ...]


def parse_request(argv: list[str]) -> Request | None:
    """(arguments, start folder, policy ref option, trust option, format) of a plain audit,
    or None for anything else (other commands, --verify-all, unknown options, help)."""
    options: dict[str, str] = {"directory": ".", "format": "text"}
    args = list(argv)
    seen_audit = False
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg == "audit" and not seen_audit:
            seen_audit = True
            continue
        if arg == "--debug" and not seen_audit:
            continue
        target = "format" if seen_audit and name == "--format" else None
        if not seen_audit:
            target = _GLOBAL_OPTIONS.get(name)
        if target is None or (not eq and not args):
            return None
        options[target] = value if eq else args.pop(0)
    if not seen_audit or options["format"] not in FORMATS:
        return None
    return (
        tuple(argv),
        options["directory"],
        options.get("policy_ref"),
        options.get("trust"),
        options["format"],
    )


def parse_freeze_request(argv: list[str]) -> Request | None:
    """The same for `audit_source_freeze.py [-C DIR] [--json] [--policy-ref REF]` (a --ref
    run, or one at pre-push under pre-commit, judges a named commit: not answered here)."""
    options: dict[str, str] = {"directory": ".", "format": "freeze-text"}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg == "--json":
            options["format"] = "freeze-json"
            continue
        target = {"-C": "directory", "--policy-ref": "policy_ref"}.get(name)
        if target is None or (not eq and not args):
            return None
        options[target] = value if eq else args.pop(0)
    if any(os.environ.get(name) for name in _PUSHED_REF_VARIABLES):
        return None
    argv_key = ("audit_source_freeze", *argv)
    return (argv_key, options["directory"], options.get("policy_ref"), None, options["format"])


# A file's row in a folder's stream: its name, then "\0f" and its mode, inode, size, mtime
# and ctime (ns) at fixed widths, packed (formatting them was a tenth of the walk); a
# symlink's row (its mode says so) then adds "d" for a dangling one or "t" and its target's
# device and key. Names hold no NUL and are never empty, so the stream reads back one way.
_STRUCT_ERROR: type[Exception] = _struct.error  # type: ignore[attr-defined]
_FILE_ROW = _struct.Struct("<2sIQQqq").pack
_TARGET_ROW = _struct.Struct("<cQIQQqq").pack


def _packed_key(info: os.stat_result, folder: str) -> bytes:
    try:
        return _FILE_ROW(
            b"\0f", info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns
        )
    except _STRUCT_ERROR as exc:
        raise IneligibleError(f"{folder}: a stat field beyond 64 bits") from exc


def _key(info: os.stat_result) -> str:
    return f"{info.st_dev},{info.st_ino},{info.st_size},{info.st_mtime_ns},{info.st_ctime_ns}"


class _Digest:
    """A running hash of the fingerprint's lines, and (when ``track_newest``, for the full
    path's racy check) the newest timestamp seen: the warm answer never needs it."""

    def __init__(self, *, track_newest: bool = True) -> None:
        self.hash = _new_hash()
        self.track_newest = track_newest
        self.newest_ns = 0

    def line(self, *parts: object) -> None:
        self.hash.update("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogateescape"))
        self.hash.update(b"\x1e")

    def stat(self, label: str, path: str) -> None:
        """The stat key of ``path`` (not followed), or that it is missing."""
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            self.line(label, path, "missing")
            return
        self.newest_ns = max(self.newest_ns, info.st_mtime_ns, info.st_ctime_ns)
        self.line(label, path, info.st_mode, _key(info))

    def tree(
        self, label: str, top: str, *, skip_top: str = "", skip_all: str = "", skip: Skip = ()
    ) -> None:
        """Every entry under ``top``: the key of each file and symlink (mode, inode, size,
        mtime, ctime; a symlink adds its target's stat key) and the name of each folder; a
        symlinked or unreadable folder is :class:`IneligibleError`. A folder whose path
        (relative to ``top``) is in ``skip`` is named and not entered. The device is keyed
        once, with ``top``: a file with another one under it is a mount point, a folder; a
        folder mounted in the tree lists files of other inodes and ctimes."""
        top_info = os.stat(top)
        self.line(label, top, top_info.st_mode, top_info.st_dev)
        rows, newest = tree_rows(top, skip_top, skip_all, skip, track_newest=self.track_newest)
        self.hash.update(rows)
        self.newest_ns = max(newest, self.newest_ns)


def python_tree_rows(
    top: str, skip_top: str, skip_all: str, skip: Skip, *, track_newest: bool
) -> tuple[bytes, int]:
    """The rows of every folder under ``top`` and the newest timestamp seen (the files' only
    with ``track_newest``, for the full path's racy check; the symlinks' targets always).

    Each folder's rows are sorted by name and followed by its path relative to ``top``;
    folders come off a stack pushed in the listing's order. The cost is one ``lstat`` per
    file (``fstatat`` on the listed folder, so the kernel does not walk the path again) and
    one packed row: folders are told apart by the listing's file type and never stat'ed (a
    folder's times move when Python writes bytecode into it, and every change they stand
    for shows in its listing). gates._walk does the same in C (:func:`tree_rows`)."""
    chunks: list[bytes] = []
    pending = [""]
    newest = 0
    while pending:
        prefix = pending.pop()
        folder = f"{top}/{prefix}" if prefix else top
        rows: list[bytes] = []
        infos: list[os.stat_result] = []
        try:
            handle = os.open(folder, _DIRECTORY_FLAGS)
        except OSError as exc:
            raise IneligibleError(f"{folder}: unreadable") from exc
        try:
            with os.scandir(handle) as listing:
                for entry in listing:
                    name = entry.name
                    if entry.is_dir(follow_symlinks=False):
                        if name == skip_all or (name == skip_top and not prefix):
                            continue
                        rows.append(name.encode("utf-8", "surrogateescape") + b"\0/")
                        relpath = f"{prefix}/{name}" if prefix else name
                        if relpath not in skip:
                            pending.append(relpath)
                        continue
                    if name == skip_top and not prefix:  # a linked worktree's .git file
                        continue
                    info = entry.stat(follow_symlinks=False)
                    row = name.encode("utf-8", "surrogateescape") + _packed_key(info, folder)
                    if _S_ISLNK(info.st_mode):  # the row's own mode says a target follows
                        target, newest = _target(handle, name, f"{folder}/{name}", newest)
                        row += target
                    rows.append(row)
                    if track_newest:
                        infos.append(info)
        except OSError as exc:
            raise IneligibleError(f"{folder}: unreadable") from exc
        finally:
            os.close(handle)
        rows.sort()  # the listing's order is the file system's: the key is not
        # a name is never empty and holds no NUL: a NUL where a name would start ends
        # the folder, which is then named
        rows.append(b"\0" + prefix.encode("utf-8", "surrogateescape") + b"\0")
        chunks.append(b"".join(rows))
        for info in infos:
            newest = max(newest, info.st_mtime_ns, info.st_ctime_ns)
    return b"".join(chunks), newest


def _target(handle: int, name: str, path: str, newest: int) -> tuple[bytes, int]:
    """What the symlink ``name`` in the open folder ``handle`` adds to its row (its target's
    stat key, device first, or that it dangles), and ``newest`` with the target's times.
    Resolved from the folder, not by ``path``: a link whose whole path is longer than the
    kernel takes still has its target keyed (``path`` only names it in a refusal)."""
    try:
        target = os.stat(name, dir_fd=handle)
    except OSError:
        return b"d", newest
    if _S_ISDIR(target.st_mode):
        raise IneligibleError(f"{path}: a symlinked folder")
    newest = max(newest, target.st_mtime_ns, target.st_ctime_ns)
    try:
        row = _TARGET_ROW(
            b"t",
            target.st_dev,
            target.st_mode,
            target.st_ino,
            target.st_size,
            target.st_mtime_ns,
            target.st_ctime_ns,
        )
    except _STRUCT_ERROR as exc:
        raise IneligibleError(f"{path}: a stat field beyond 64 bits") from exc
    return row, newest


def tree_rows(
    top: str, skip_top: str, skip_all: str, skip: Skip, *, track_newest: bool
) -> tuple[bytes, int]:
    """:func:`python_tree_rows`, in C where gates._walk was built and names are the file
    system's bytes in UTF-8 (the same rows, byte for byte: tests/test_walk.py)."""
    if _native_tree_rows is None:
        return python_tree_rows(top, skip_top, skip_all, skip, track_newest=track_newest)
    encoded = tuple(map(os.fsencode, skip))
    try:
        return _native_tree_rows(
            os.fsencode(top), os.fsencode(skip_top), os.fsencode(skip_all), encoded, track_newest
        )
    except ValueError as exc:
        raise IneligibleError(str(exc)) from exc


def _nearest(start: str, name: str) -> str | None:
    folder = start
    while True:
        if os.path.lexists(os.path.join(folder, name)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _git_dirs(worktree: str) -> tuple[str, str]:
    """(the git dir, the common dir) of a worktree whose `.git` is a folder or a gitdir file."""
    dot_git = os.path.join(worktree, ".git")
    if os.path.isdir(dot_git):
        git_dir = dot_git
    else:
        with open(dot_git, encoding="utf-8") as handle:
            first = handle.readline().strip()
        if not first.startswith("gitdir: "):
            raise IneligibleError(f"{dot_git}: not a gitdir file")
        git_dir = os.path.join(worktree, first.removeprefix("gitdir: "))
    common = git_dir
    commondir_file = os.path.join(git_dir, "commondir")
    if os.path.isfile(commondir_file):
        with open(commondir_file, encoding="utf-8") as handle:
            common = os.path.join(git_dir, handle.read().strip())
    return os.path.realpath(git_dir), os.path.realpath(common)


def _quoted_strings(text: str) -> list[str]:
    """Every string of a TOML document (a superset of the key paths a trust file names),
    without importing tomllib (and `re` with it); escapes and multi-line strings are
    :class:`IneligibleError` rather than parsed."""
    if "\\" in text or '"""' in text or "'''" in text:
        raise IneligibleError("a trust file with escapes or multi-line strings")
    found: list[str] = []
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char == "#":
            newline = text.find("\n", position)
            position = length if newline < 0 else newline + 1
        elif char in "\"'":
            end = text.find(char, position + 1)
            if end < 0:
                raise IneligibleError("an unterminated string in the trust file")
            found.append(text[position + 1 : end])
            position = end + 1
        else:
            position += 1
    return found


def _package_folder() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def cache_folder() -> str | None:
    """gates' cache folder, as gates.hashing.cache_file finds it; None when caching is off."""
    configured = os.environ.get("GATES_CACHE_DIR")
    if configured == "off":
        return None
    if configured:
        return configured
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg or os.path.join(os.path.expanduser("~"), ".cache"), "gates")


def workspace_root(request: Request) -> str:
    start = os.path.realpath(request[1])
    root = _nearest(start, "gates.toml")
    if root is None or not os.path.isfile(os.path.join(root, "gates.toml")):
        raise IneligibleError("no gates.toml")
    return root


def fingerprint(request: Request, skip: Skip = (), *, track_newest: bool = True) -> tuple[str, int]:
    """(the hex digest of everything the audit reads for ``request``, the newest timestamp
    among the files seen, or 0 without ``track_newest``); :class:`IneligibleError` when it
    cannot be computed. The folders in ``skip`` are left out: only the freeze script's full
    path names them (the governance paths, which the freeze check never reads), and the
    digest names the list."""
    argv, _directory, _policy_ref, trust_option, _format = request
    digest = _Digest(track_newest=track_newest)
    digest.line("request", STORE_VERSION.decode(), *argv)
    digest.line("skip", *skip)
    digest.line("cwd", os.getcwd())
    digest.line("stdout", getattr(sys.stdout, "encoding", None), sys.stdout.isatty())
    digest.line("date", time.strftime("%Y-%m-%d", time.gmtime()))
    for name in sorted(os.environ):
        if name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES:
            digest.line("env", name, os.environ[name])
    _gates_itself(digest)
    root = workspace_root(request)
    digest.line("workspace", root)
    _repository(digest, root, skip)
    trust = trust_option or os.environ.get("GATES_TRUST")
    if trust:
        _trust_file(digest, os.path.abspath(os.path.expanduser(trust)))
    return digest.hash.hexdigest(), digest.newest_ns


def _gates_itself(digest: _Digest) -> None:
    """The interpreter, the folders it imports from, gates' files and its shipped data."""
    digest.line("python", sys.executable, sys.version, sys.flags)
    for folder in sys.path:
        digest.stat("sys.path", folder or os.getcwd())
    # bytecode is checked against its source by Python; the first run after an edit writes it
    digest.tree("gates", _package_folder(), skip_all="__pycache__")
    if not os.path.isdir(os.path.join(_package_folder(), "_data")):  # a checkout (resources.py)
        checkout = os.path.dirname(_package_folder())
        for data in ("receipts/schemas", "contracts"):
            digest.tree("gates-data", os.path.join(checkout, data), skip_all="__pycache__")


def _repository(digest: _Digest, root: str, skip: Skip) -> None:
    """The git worktree holding the workspace (every file), and git's own state."""
    worktree = _nearest(root, ".git")
    if worktree is None:
        raise IneligibleError("no git repository")
    git_dir, common_dir = _git_dirs(worktree)
    digest.line("git", worktree, git_dir, common_dir)
    digest.tree("worktree", worktree, skip_top=".git", skip=skip)
    for name in _GIT_FILES:
        digest.stat("git", os.path.join(git_dir, name))
    for name in _GIT_COMMON_FILES:
        digest.stat("git-common", os.path.join(common_dir, name))
    digest.tree("refs", os.path.join(common_dir, "refs"))
    if git_dir != common_dir and os.path.isdir(os.path.join(git_dir, "refs")):
        digest.tree("worktree-refs", os.path.join(git_dir, "refs"))
    home = os.path.expanduser("~")
    xdg_config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    for path in (
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg_config, "git", "config"),
        os.path.join(xdg_config, "git", "ignore"),
        os.path.join(xdg_config, "git", "attributes"),
        "/etc/gitconfig",
    ):
        digest.stat("git-user", path)


def _trust_file(digest: _Digest, trust_path: str) -> None:
    """The trust file's bytes and the stat keys of the public keys it names (any string in it
    that names a file: the public keys are among them)."""
    digest.stat("trust", trust_path)
    try:
        with open(trust_path, "rb") as handle:
            data = handle.read()
        strings = _quoted_strings(data.decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise IneligibleError(f"{trust_path}: unreadable trust file") from exc
    digest.line("trust-bytes", _new_hash(data).hexdigest())
    for relpath in strings:  # each string that names a file is a key path, or harmless
        key_path = os.path.join(os.path.dirname(trust_path), relpath)
        digest.stat("trust-key", key_path)
        if os.path.islink(key_path):
            digest.stat("trust-key-target", os.path.realpath(key_path))


def store_path(request: Request) -> str | None:
    """One stored report per workspace and argument list, in gates' cache folder."""
    folder = cache_folder()
    if folder is None:
        return None
    root = workspace_root(request)
    name = _new_hash(root.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    # `python -m gates` and the `gates` script differ in sys.path: one entry each
    call_parts = (os.getcwd(), sys.executable, *sys.path, "\x1e", *request[0])
    call = _new_hash("\x1f".join(call_parts).encode()).hexdigest()[:16]
    return os.path.join(folder, f"{name}.report.{call}")


class Stored:
    """A stored report, held open (a report stored meanwhile replaces the file, not what this
    handle reads): the folders its fingerprint left out, the fingerprint, the exit code,
    and where stdout's bytes start."""

    def __init__(
        self, handle: BinaryIO, skip: Skip, fingerprint: str, code: int, offset: int
    ) -> None:
        self.handle = handle
        self.skip = skip
        self.fingerprint = fingerprint
        self.code = code
        self.offset = offset

    def body(self) -> bytes:
        """Stdout as the full path wrote it."""
        self.handle.seek(self.offset)
        return self.handle.read()

    def print_body(self) -> bool:
        """Write the body on stdout; False (nothing written) when it cannot be the full
        path's bytes: then the full path runs.

        A UTF-8 stdout gets the stored bytes themselves, which are what the full path wrote
        (they were encoded from its text the way stdout encodes; its encoding is in the
        fingerprint), copied by the kernel (``sendfile``): decoding and encoding an 11 MB
        JSON report cost 2x `git status` on its own. Any other stdout gets the text."""
        stream = sys.stdout
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        try:
            out = stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
            out = -1
        if encoding not in ("utf8", "utf_8") or out < 0:
            try:
                text = self.body().decode("utf-8")
            except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
                return False
            stream.write(text)
            stream.flush()
            return True
        stream.flush()
        offset = self.offset
        size = os.fstat(self.handle.fileno()).st_size
        try:
            while offset < size:
                sent = os.sendfile(out, self.handle.fileno(), offset, size - offset)
                if sent == 0:
                    break
                offset += sent
        except BrokenPipeError:
            raise
        except OSError:  # an output sendfile does not take (an O_APPEND file): write the rest
            self.handle.seek(offset)
            rest = memoryview(self.handle.read())
            while rest:
                rest = rest[os.write(out, rest) :]
        return True

    def close(self) -> None:
        self.handle.close()


def read_stored(path: str) -> Stored | None:
    """The report stored at ``path``, open (the caller closes it), or None when there is none
    or its header is malformed."""
    try:
        handle = open(path, "rb")  # noqa: SIM115  (held by the Stored, which closes it)
    except OSError:
        return None
    try:
        version, skip, stored, code = (handle.readline() for _ in range(4))
        if version != STORE_VERSION + b"\n" or code not in (b"0\n", b"1\n"):
            handle.close()
            return None
        folders = tuple(skip[:-1].decode("utf-8").split("\x1f")) if skip[:-1] else ()
        fingerprint_ = stored[:-1].decode("ascii")
        return Stored(handle, folders, fingerprint_, int(code), handle.tell())
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        handle.close()
        return None


def _write_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
        _remove(temporary)


class _Armed:
    """What the full path needs to store its report: set by :func:`main` before it runs."""

    def __init__(self, request: Request, path: str, before: str, skip: Skip) -> None:
        self.request = request
        self.path = path
        self.before = before
        #: the folders ``before`` left out, and those the full path says it did not read
        self.skip = skip
        self.unread: Skip = ()
        self.stdout: list[str] = []
        self.stderr_written = False


#: The run that may store its report (set by :func:`warm_answer`, one at most).
_ARMED: list[_Armed] = []


def recording(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``echo``, also keeping what it printed when this run may store its report."""
    if not _ARMED:
        return echo
    armed = _ARMED[0]

    def tee(text: str) -> None:
        armed.stdout.append(text + "\n")  # what click.echo writes
        echo(text)

    return tee


def unread_folders(workspace: str, folders: tuple[str, ...]) -> None:
    """The freeze script's full path: ``folders`` (relative to ``workspace``) are never read
    by this run, so its stored answer need not key on what they hold."""
    if not _ARMED:
        return
    worktree = _nearest(os.path.realpath(workspace), ".git")
    if worktree is None:
        return
    base = os.path.relpath(os.path.realpath(workspace), worktree)
    kept = []
    for folder in folders:
        path = os.path.normpath(os.path.join(base, folder))
        if os.path.isabs(path) or path.startswith("..") or path == "." or "\n" in path:
            continue
        if "\x1f" not in path and path.split("/")[0] != ".git":
            kept.append(path)
    _ARMED[0].unread = tuple(sorted(set(kept)))


def store(code: int, *, external_roots: bool) -> None:
    """Keep this run's report for the warm path, when every condition in the module doc holds."""
    armed = _ARMED.pop() if _ARMED else None
    if armed is None or code not in (0, 1) or external_roots or armed.stderr_written:
        return
    try:
        after, newest_ns = fingerprint(armed.request, armed.skip)
        if after != armed.before or time.time_ns() - newest_ns <= RACY_WINDOW_NS:
            return
        if armed.unread != armed.skip:
            if armed.skip:  # `before` left out folders this run may have read: start over
                _remove(armed.path)
                return
            # nothing changed anywhere while the run ran (`after` walked everything); the
            # key without the unread folders, then everything again: unchanged around it
            full = after
            after, newest_ns = fingerprint(armed.request, armed.unread)
            if time.time_ns() - newest_ns <= RACY_WINDOW_NS:
                return
            if fingerprint(armed.request)[0] != full:
                return
    except (IneligibleError, OSError, ValueError):
        return
    body = "".join(armed.stdout)
    skip_line = "\x1f".join(armed.unread).encode("utf-8")
    _write_atomic(
        armed.path,
        b"\n".join((STORE_VERSION, skip_line, after.encode(), str(code).encode(), b""))
        + body.encode("utf-8", "surrogateescape"),
    )


def _remove(path: str) -> None:
    """Unlink ``path`` if it is there (contextlib.suppress would import collections)."""
    try:
        os.unlink(path)
    except OSError:
        pass


class _RecordingStdout:
    """sys.stdout, keeping what is written (the freeze script prints with `print`)."""

    def __init__(self, stream: Any, armed: _Armed) -> None:
        self._stream = stream
        self._armed = armed

    def write(self, text: str) -> int:
        self._armed.stdout.append(text)
        written: int = self._stream.write(text)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _FlaggingStderr:
    """sys.stderr, noting that something was written (then the report is not stored)."""

    def __init__(self, stream: Any, armed: _Armed) -> None:
        self._stream = stream
        self._armed = armed

    def write(self, text: str) -> int:
        if text:
            self._armed.stderr_written = True
        written: int = self._stream.write(text)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def warm_answer(argv: list[str], *, freeze_script: bool = False) -> int | None:
    """The exit code after printing a stored report for ``argv``, or None (then arms the
    full path to store one when ``argv`` is an eligible audit)."""
    _ARMED.clear()
    request = parse_freeze_request(argv) if freeze_script else parse_request(argv)
    if request is None:
        return None
    try:
        path = store_path(request)
        if path is None:
            return None
        found = read_stored(path)
    except (IneligibleError, OSError, ValueError):
        return None
    try:
        # only the freeze script's answer may leave folders out (those it never reads)
        skip = found.skip if found is not None and freeze_script else ()
        current, _ = fingerprint(request, skip, track_newest=False)
    except (IneligibleError, OSError, ValueError):
        if found is not None:
            found.close()
        return None
    if found is not None:
        try:  # an error once output has begun is the user's (the full path would repeat it)
            if found.fingerprint == current and found.print_body():
                return found.code
        finally:
            found.close()
    armed = _Armed(request, path, current, skip)
    _ARMED.append(armed)
    sys.stderr = _FlaggingStderr(sys.stderr, armed)
    return None


def storing_stdout(run: Callable[[], int]) -> int:
    """``run()`` with what it prints kept, then stored as the freeze script's answer."""
    if not _ARMED:
        return run()
    real_stdout = sys.stdout
    sys.stdout = _RecordingStdout(real_stdout, _ARMED[0])
    try:
        code = run()
    finally:
        sys.stdout = real_stdout
    store(code, external_roots=False)  # the freeze reads no evidence
    return code
