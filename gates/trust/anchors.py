"""Trust anchors: which public keys may attest evidence, and for which framework.

A trust file is TOML:

    [[signers]]
    name = "paddle-ci"
    public_key = "keys/paddle-ci.pub"   # relative to the trust file, or the PEM inline
    frameworks = ["paddle"]             # or ["*"]
    revoked = false

It comes from ``--trust FILE`` / ``GATES_TRUST`` (provisioned by CI, outside the
workspace), or from ``[trust] ref`` + ``path`` of the policy in force, read
from that git ref's tree: never from the worktree or the commit under audit.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, StrictBool, StringConstraints, ValidationError

from gates.core.content_ids import canonical_json
from gates.core.errors import GatesError
from gates.core.validation import first_error

if TYPE_CHECKING:
    from securesystemslib.signer import Key

PEM_HEADER = "-----BEGIN PUBLIC KEY-----"
ANY_FRAMEWORK = "*"

Text = Annotated[str, StringConstraints(min_length=1)]


class TrustError(GatesError):
    """A trust file that cannot be read or names a key that cannot be loaded."""


class SignerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Text
    public_key: Text
    frameworks: tuple[Annotated[str, StringConstraints(pattern=r"^(\*|torch|paddle|replay)$")], ...]
    revoked: StrictBool = False


class TrustFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    signers: tuple[SignerEntry, ...]


@dataclass(frozen=True)
class TrustedSigner:
    name: str
    public_pem: str
    frameworks: tuple[str, ...]
    revoked: bool

    @functools.cached_property
    def keyid(self) -> str:
        """securesystemslib's key id; computed on first use, so a warm audit whose
        verdicts are cached never loads the signing library."""
        return keyid_of(self.public_pem)

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.public_pem.encode("ascii")).hexdigest()

    def may_attest(self, framework: str | None) -> bool:
        """A signer attests its frameworks; framework-less evidence needs any trusted signer."""
        return framework is None or bool({ANY_FRAMEWORK, framework} & set(self.frameworks))

    def key(self) -> Key:
        return _sslib_key(self.public_pem, self.keyid)


@dataclass(frozen=True)
class Anchors:
    """The signers in force and where they came from (``source`` is said in every report)."""

    source: str
    signers: tuple[TrustedSigner, ...] = ()
    proposed_changes: tuple[str, ...] = field(default=())
    origin: str = "none"  # GATES_TRUST, --trust or the git ref: stable, for the PR block
    #: the worktree's copy of the trust file at the ref, when it would not load once merged
    invalid_changes: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        names = ", ".join(s.name + (" (revoked)" if s.revoked else "") for s in self.signers)
        return f"{len(self.signers)} signer(s) from {self.origin}" + (f": {names}" if names else "")

    def by_keyid(self, keyid: str) -> TrustedSigner | None:
        return next((s for s in self.signers if s.keyid == keyid), None)

    def by_fingerprint(self, fingerprint: str) -> TrustedSigner | None:
        return next((s for s in self.signers if s.fingerprint == fingerprint), None)

    @property
    def digest(self) -> str:
        """Changes whenever any signer, key, framework or revocation changes (cache key)."""
        records = [[s.name, s.public_pem, list(s.frameworks), s.revoked] for s in self.signers]
        return hashlib.sha256(canonical_json(records)).hexdigest()


NO_ANCHORS = Anchors(source="none configured: nothing can be formal")


def _sslib_key(pem: str, keyid: str | None = None) -> Key:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import load_pem_public_key  # noqa: PLC0415
    from securesystemslib.signer import SSlibKey  # noqa: PLC0415

    public = load_pem_public_key(pem.encode("ascii"))
    if not isinstance(public, Ed25519PublicKey):
        raise ValueError("not an ed25519 public key")
    return SSlibKey.from_crypto(public, keyid=keyid)


_ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")  # RFC 8410 SubjectPublicKeyInfo


def _looks_like_ed25519_pem(pem: str) -> bool:
    """An ed25519 SubjectPublicKeyInfo in PEM, checked without loading a crypto library."""
    lines = pem.strip().splitlines()
    if len(lines) < 3 or lines[0] != PEM_HEADER or lines[-1] != "-----END PUBLIC KEY-----":
        return False
    try:
        der = base64.b64decode("".join(lines[1:-1]), validate=True)
    except binascii.Error:
        return False
    return len(der) == 44 and der.startswith(_ED25519_SPKI_PREFIX)


def keyid_of(pem: str) -> str:
    """The key id securesystemslib gives this public key (what signatures carry)."""
    return str(_sslib_key(pem).keyid)


KeyReader = Callable[[str], bytes | None]
"""Reads a key file named relative to the trust file; None when it does not exist."""


def parse_trust(text: bytes, source: str, read_key: KeyReader) -> Anchors:
    """Parse a trust file and load every key it names; any problem is a TrustError."""
    try:
        raw: dict[str, Any] = tomllib.loads(text.decode("utf-8"))
        trust = TrustFile.model_validate(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TrustError(f"trust file is not valid TOML: {exc}", file=source) from None
    except ValidationError as exc:
        first = first_error(exc, whole="(file)")
        raise TrustError(f"trust file key '{first.key}': {first.message}", file=source) from None
    signers = []
    names: set[str] = set()
    for entry in trust.signers:
        if entry.name in names:
            raise TrustError(f"signer {entry.name} is named twice", file=source)
        names.add(entry.name)
        pem = _entry_pem(entry, source, read_key)
        if not _looks_like_ed25519_pem(pem):
            raise TrustError(
                f"signer {entry.name}: public_key is not a PEM ed25519 public key",
                file=source,
                hint="`gates key pub KEYFILE` prints the right form",
            )
        signers.append(TrustedSigner(entry.name, pem, entry.frameworks, entry.revoked))
    return Anchors(source, tuple(signers))


def _entry_pem(entry: SignerEntry, source: str, read_key: KeyReader) -> str:
    if entry.public_key.lstrip().startswith(PEM_HEADER):
        return entry.public_key.strip() + "\n"
    relpath = PurePosixPath(entry.public_key)
    if relpath.is_absolute() or ".." in relpath.parts:
        raise TrustError(
            f"signer {entry.name}: public_key {entry.public_key} must be relative to the trust "
            "file's folder, without '..'",
            file=source,
        )
    data = read_key(relpath.as_posix())
    if data is None:
        raise TrustError(
            f"signer {entry.name}: public key file {entry.public_key} not found", file=source
        )
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise TrustError(
            f"signer {entry.name}: {entry.public_key} is not a PEM file", file=source
        ) from None


def load_trust_file(path: Path) -> Anchors:
    """A trust file on disk (``--trust`` / ``GATES_TRUST``); key paths relative to its folder."""
    path = path.expanduser()
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise TrustError("trust file not found", file=path) from None
    except OSError as exc:
        raise TrustError(f"cannot read trust file: {exc.strerror}", file=path) from None

    def read_key(relpath: str) -> bytes | None:
        try:
            return (path.parent / relpath).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None

    return parse_trust(text, str(path), read_key)
