"""Canonical checkpoint hashing.

Per tensor, two length-prefixed sha256 digests (every prefix an unsigned
64-bit little-endian integer):

    content = sha256(len(dtype) dtype_ascii  ndim dim_1 ... dim_n  nbytes raw_bytes)
    tensor  = sha256(len(name) name_utf8  content)

where raw_bytes are the tensor's bytes as stored (safetensors stores little
endian). The checkpoint digest is sha256 over `gates.checkpoint/v1\\n`
followed by the 32-byte tensor digests in the order of the tensor names
(sorted by their UTF-8 bytes). Keeping the content digest apart lets a
renamed tensor be compared without reading it again. Neither depends on shard boundaries, tensor
order in a file, header padding or metadata: the same tensors give the same
digest however they are sharded.

Hashing streams each tensor with large positional reads (os.pread, so the
threads of a pool can share a file), hashes tensors in parallel (hashlib
releases the GIL on large buffers), and remembers each shard's tensor
digests in the stat cache, so an unchanged shard is never read again.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gates.checkpoints.layout import Checkpoint
from gates.core.hashing import StatCache
from gates.core.progress import QUIET, Progress
from gates.safetensors.header import TensorEntry

READ_CHUNK = 16 * 1024 * 1024
DIGEST_TAG = b"gates.checkpoint/v1\n"


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def content_prefix(dtype: str, shape: tuple[int, ...], nbytes: int) -> bytes:
    kind = dtype.encode("ascii")
    dims = b"".join(_u64(dim) for dim in shape)
    return _u64(len(kind)) + kind + _u64(len(shape)) + dims + _u64(nbytes)


def content_digest_of_bytes(dtype: str, shape: tuple[int, ...], data: bytes) -> str:
    digest = hashlib.sha256(content_prefix(dtype, shape, len(data)))
    digest.update(data)
    return digest.hexdigest()


def stream_content_digest(
    fd: int, data_start: int, entry: TensorEntry, advance: Callable[[int], object] | None = None
) -> str:
    """Content digest of one stored tensor, read in large positional chunks; ``advance``
    is told each chunk's size (progress)."""
    digest = hashlib.sha256(content_prefix(entry.dtype, entry.shape, entry.nbytes))
    offset, end = data_start + entry.start, data_start + entry.end
    while offset < end:
        chunk = os.pread(fd, min(READ_CHUNK, end - offset), offset)
        if not chunk:
            raise OSError(f"file ended inside tensor {entry.name}")
        digest.update(chunk)
        offset += len(chunk)
        if advance is not None:
            advance(len(chunk))
    return digest.hexdigest()


def tensor_digest(name: str, content: str) -> bytes:
    encoded = name.encode("utf-8")
    return hashlib.sha256(_u64(len(encoded)) + encoded + bytes.fromhex(content)).digest()


def checkpoint_digest(contents: dict[str, str]) -> str:
    """The checkpoint digest from each tensor's content digest, keyed by tensor name."""
    digest = hashlib.sha256(DIGEST_TAG)
    for name in sorted(contents, key=lambda n: n.encode("utf-8")):
        digest.update(tensor_digest(name, contents[name]))
    return digest.hexdigest()


def _hash_shard(
    folder: Path,
    shard: str,
    checkpoint: Checkpoint,
    pool: ThreadPoolExecutor,
    advance: Callable[[int], object],
) -> dict[str, str]:
    header = checkpoint.shards[shard]
    fd = os.open(folder / shard, os.O_RDONLY)
    try:
        entries = sorted(header.tensors.values(), key=lambda e: e.start)
        futures = {
            e.name: pool.submit(stream_content_digest, fd, header.data_start, e, advance)
            for e in entries
        }
        return {name: future.result() for name, future in futures.items()}
    finally:
        os.close(fd)


def hash_shards(
    checkpoint: Checkpoint,
    shards: Iterable[str],
    *,
    cache: StatCache,
    cache_prefix: str,
    threads: int,
    progress: Progress = QUIET,
) -> dict[str, str]:
    """Content digests of every tensor of the given shards; unchanged shards come from cache."""
    digests: dict[str, str] = {}
    todo = []
    for shard in shards:
        path = checkpoint.folder / shard
        info = path.stat()
        key = f"{cache_prefix}/{shard}"
        cached = cache.lookup("shards", key, info)
        if cached is not None:
            digests.update(json.loads(cached))
        else:
            todo.append((shard, path, info, key))
    total = sum(
        sum(e.nbytes for e in checkpoint.shards[shard].tensors.values()) for shard, *_ in todo
    )
    label = f"hashing {len(todo)} shard(s)"
    with (
        ThreadPoolExecutor(max_workers=max(threads, 1)) as pool,
        progress.bar(total, label) as shown,
    ):
        advance = _locked(shown.update) if progress.shown else _ignore
        for shard, path, info, key in todo:
            found = _hash_shard(checkpoint.folder, shard, checkpoint, pool, advance)
            cache.remember("shards", key, path, info, json.dumps(found, sort_keys=True))
            digests.update(found)
    return digests


def _locked(update: Callable[[int], object]) -> Callable[[int], object]:
    """The bar's update from the hashing threads, one at a time."""
    lock = threading.Lock()

    def advance(count: int) -> None:
        with lock:
            update(count)

    return advance


def _ignore(_: int) -> None:
    """Progress off: nothing to tell (cheaper than a disabled bar's update)."""


def default_threads() -> int:
    return max(1, min(8, os.cpu_count() or 1))
