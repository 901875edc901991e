"""Signing keys: ed25519 private keys in PEM files, held outside any repository.

A process that signs finds its key through ``GATES_SIGNING_KEY`` (a path, never
the key itself: launchers copy the whole environment into their logs). A key
file readable by group or others is refused, as ssh refuses one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gates.core.errors import GatesError
from gates.core.invocation import SIGNING_KEY_VARIABLE

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from securesystemslib.signer import CryptoSigner

MAX_KEY_BYTES = 64 * 1024


class SigningKeyError(GatesError):
    """A signing key that cannot be created or used."""


@dataclass(frozen=True)
class SigningKey:
    """A checked private key; the signer around it is built on first use (or in the
    background while a run goes on: the signing library takes a while to import)."""

    path: Path
    private: Ed25519PrivateKey

    @functools.cached_property
    def signer(self) -> CryptoSigner:
        from securesystemslib.signer import CryptoSigner  # noqa: PLC0415

        return CryptoSigner(self.private)

    @property
    def keyid(self) -> str:
        return str(self.signer.public_key.keyid)

    def preload(self) -> threading.Thread:
        """Build the signer in a thread; join it before signing."""
        thread = threading.Thread(target=lambda: self.signer, daemon=True)
        thread.start()
        return thread


def _refuse_inside_repository(path: Path) -> None:
    for folder in (path.parent, *path.parent.parents):
        for marker in (".git", "gates.toml"):
            if (folder / marker).exists():
                raise SigningKeyError(
                    f"refusing to write a private key inside {folder} (it holds {marker}): "
                    "a key in a repository's tree, evidence or source is one commit from public",
                    file=path,
                    hint="keep keys outside every repository, e.g. ~/.config/gates/keys/",
                )


def _make_private_folders(folder: Path) -> None:
    """Create the key's missing folders, each mode 0700 whatever the umask: a key folder
    others can list tells them where the key is, and lets them swap it before it is read."""
    missing = [f for f in (folder, *folder.parents) if not f.exists()]
    for created in reversed(missing):
        try:
            created.mkdir(mode=0o700)
            created.chmod(0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            raise SigningKeyError(
                f"cannot create its folder {created}: {exc.strerror}", file=folder
            ) from None
    if not folder.is_dir():
        raise SigningKeyError("its folder is not a folder", file=folder)


def new_key(path: Path) -> str:
    """Write a fresh ed25519 private key to ``path`` (mode 0600) and return its key id."""
    from securesystemslib.signer import CryptoSigner  # noqa: PLC0415

    path = path.expanduser().absolute()
    _refuse_inside_repository(path)
    if os.path.lexists(path):
        raise SigningKeyError("already exists; refusing to overwrite a key", file=path)
    _make_private_folders(path.parent)
    signer = CryptoSigner.generate_ed25519()
    pem = signer.private_bytes  # PKCS#8 PEM, unencrypted
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, path)  # fails if path appeared meanwhile: never overwrites
    except FileExistsError:
        raise SigningKeyError("already exists; refusing to overwrite a key", file=path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return str(signer.public_key.keyid)


def load_key(path: Path) -> SigningKey:
    """Read a private key file, refusing a loose mode, a non-file, or a non-ed25519 key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: PLC0415
        Ed25519PrivateKey as Ed25519,
    )
    from cryptography.hazmat.primitives.serialization import load_pem_private_key  # noqa: PLC0415

    try:
        info = path.stat()
    except FileNotFoundError:
        raise SigningKeyError("signing key file not found", file=path) from None
    except OSError as exc:
        raise SigningKeyError(f"cannot read signing key: {exc.strerror}", file=path) from None
    if not stat.S_ISREG(info.st_mode):
        raise SigningKeyError("signing key is not a regular file", file=path)
    if info.st_mode & 0o077:
        raise SigningKeyError(
            f"signing key is readable by group or others (mode {stat.S_IMODE(info.st_mode):04o})",
            file=path,
            hint=f"chmod 600 {path}",
        )
    if info.st_size > MAX_KEY_BYTES:
        raise SigningKeyError("signing key file is too large to be a key", file=path)
    try:
        private = load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(
            f"not an unencrypted PEM private key ({exc})",
            file=path,
            hint="make one with `gates key new PATH`",
        ) from None
    if not isinstance(private, Ed25519):
        raise SigningKeyError("signing key is not an ed25519 key", file=path)
    return SigningKey(path, private)


def configured_key(path: Path | None) -> SigningKey | None:
    """The key the invocation names (GATES_SIGNING_KEY, `Invocation.signing_key`), or None
    when none is named; a bad key is an error that names the variable."""
    if path is None:
        return None
    try:
        return load_key(path)
    except SigningKeyError as exc:
        raise SigningKeyError(
            f"{SIGNING_KEY_VARIABLE}: {exc.message}", file=path, hint=exc.hint
        ) from None


def public_pem(key: SigningKey) -> str:
    """The public key as SubjectPublicKeyInfo PEM, the form a trust file holds."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return str(
        key.private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )
