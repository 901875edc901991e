"""Verification by the training job's own ranks: split the shards, hash, gather, merge.

Under `python -m paddle.distributed.launch` every process has a rank
(``PADDLE_TRAINER_ID``) and the world size (``PADDLE_TRAINERS_NUM``). Each
rank reads the shard headers itself (cheap), computes the same plan (shards
balanced by bytes), hashes its share and reports it through the key-value
store the launcher's job already runs (Paddle's TCPStore). Rank 0 waits for
every report up to an overall timeout, checks that every shard was hashed
exactly once, by the rank the plan gave it to, of the same checkpoint, and
merges. Gloo collectives are not used: they time out after a fixed 30 s when
ranks arrive apart, and hashing shards makes ranks arrive minutes apart.

The pure parts (plan, report, merge) take no store, so they are the same for
one process and for many; world size 1 never touches Paddle.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from gates.core.errors import GatesError
from gates.core.invocation import Launcher

DEFAULT_TIMEOUT_S = 7200.0
POLL_S = 0.2
#: how long rank 0, after publishing the verdict, waits for the ranks that reported to read it
ACK_TIMEOUT_S = 60.0
_NAMESPACE = "gates/checkpoint-check"


class RanksError(GatesError):
    """The ranks' results cannot be merged; the message names the rank(s)."""


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    local_size: int = 1


def launcher_world(launcher: Launcher) -> World:
    """This process's rank and the world size from the launcher's variables (the command's
    invocation: `Invocation.launcher`; 1 without one)."""
    raw_rank, raw_size = launcher.rank, launcher.world
    if raw_size is None and raw_rank is None:
        return World(0, 1)
    try:
        rank, size = int(raw_rank or ""), int(raw_size or "")
    except ValueError:
        raise RanksError(
            f"launcher environment is not usable: PADDLE_TRAINER_ID={raw_rank!r}, "
            f"PADDLE_TRAINERS_NUM={raw_size!r}",
            hint="start through python -m paddle.distributed.launch, or unset both",
        ) from None
    if size < 1 or not 0 <= rank < size:
        raise RanksError(f"launcher environment: rank {rank} is not in a world of {size}")
    local = launcher.local_size or "1"
    return World(rank, size, max(1, int(local)) if local.isdigit() else 1)


def balance(sizes: Mapping[str, int], count: int) -> list[list[str]]:
    """Split shards over ``count`` ranks by bytes: largest first, each to the lightest rank.

    Deterministic (ties by name, then by rank), so every rank computes the same plan.
    """
    loads = [0] * count
    plan: list[list[str]] = [[] for _ in range(count)]
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        lightest = min(range(count), key=lambda r: (loads[r], r))
        plan[lightest].append(name)
        loads[lightest] += sizes[name]
    return [sorted(shards) for shards in plan]


@dataclass(frozen=True)
class ShardState:
    """What a rank saw of one shard while hashing it: size and mtime, and the file's sha256
    when the check binds the files (external roots)."""

    size: int
    mtime_ns: int
    sha256: str | None = None


@dataclass(frozen=True)
class RankReport:
    rank: int
    label: str
    layout_digest: str
    shards: list[str]
    contents: dict[str, str] = field(default_factory=dict)
    files: dict[str, ShardState] = field(default_factory=dict)
    error: str | None = None

    @property
    def byte_count(self) -> int:
        return sum(state.size for state in self.files.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, data: str | bytes) -> RankReport:
        raw: dict[str, Any] = json.loads(data)
        files = {name: ShardState(**state) for name, state in raw.pop("files").items()}
        return cls(files=files, **raw)


@dataclass(frozen=True)
class Merged:
    contents: dict[str, str]
    files: dict[str, ShardState]
    ranks: list[dict[str, object]]


def merge_reports(
    plan: list[list[str]],
    reports: Mapping[int, RankReport | None],
    *,
    label: str,
    layout_digest: str,
    timeout_s: float,
) -> Merged:
    """Every rank reported, about this checkpoint, its own share; every shard exactly once."""
    problems: list[str] = []
    for rank in range(len(plan)):
        report = reports.get(rank)
        if report is None:
            problems.append(
                f"rank {rank} did not report within {timeout_s:g} s (failed or killed; "
                f"see the launcher's workerlog.{rank})"
            )
        elif report.error:
            problems.append(f"rank {rank} failed: {report.error}")
        elif report.label != label or report.layout_digest != layout_digest:
            problems.append(
                f"rank {rank} checked another checkpoint ({report.label}, layout "
                f"{report.layout_digest[:12]}) than rank 0 ({label}, layout {layout_digest[:12]})"
            )
        elif report.shards != plan[rank]:
            problems.append(
                f"rank {rank} hashed {len(report.shards)} shard(s) other than its share of "
                f"{len(plan[rank])}"
            )
    if problems:
        raise RanksError("; ".join(problems))
    done = {rank: report for rank, report in reports.items() if report is not None}
    hashed_by: dict[str, list[int]] = {}
    for rank in range(len(plan)):
        for shard in done[rank].shards:
            hashed_by.setdefault(shard, []).append(rank)
    twice = sorted(s for s, r in hashed_by.items() if len(r) > 1)
    never = sorted({s for share in plan for s in share} - set(hashed_by))
    if twice or never:
        raise RanksError(f"shards hashed twice: {twice[:5]}; never: {never[:5]}")
    contents: dict[str, str] = {}
    files: dict[str, ShardState] = {}
    ranks: list[dict[str, object]] = []
    for rank in range(len(plan)):
        report = done[rank]
        contents.update(report.contents)
        files.update(report.files)
        ranks.append({"rank": rank, "shards": report.shards, "bytes": report.byte_count})
    return Merged(contents, files, ranks)


class Store(Protocol):
    """The part of Paddle's TCPStore used here."""

    def set(self, key: str, value: str) -> None: ...
    def get(self, key: str) -> bytes: ...
    def add(self, key: str, value: int) -> int: ...


class Exchange:
    """Reports and the verdict through a key-value store, tolerant of ranks arriving apart.

    Keys are numbered per call (every rank counts its own calls, and all ranks
    make the same calls), so a trainer may check after every save.
    """

    def __init__(self, store: Store, world: World) -> None:
        self.store = store
        self.world = world
        call = store.add(f"{_NAMESPACE}/calls/{world.rank}", 1)
        self.prefix = f"{_NAMESPACE}/{call}"

    def report(self, report: RankReport) -> None:
        self.store.set(f"{self.prefix}/report/{report.rank}", report.to_json())
        self.store.add(f"{self.prefix}/reported/{report.rank}", 1)

    def _arrived(self, key: str) -> bool:
        return self.store.add(key, 0) > 0

    def gather(self, timeout_s: float) -> dict[int, RankReport | None]:
        """Rank 0: every rank's report; None for a rank that did not report in time."""
        deadline = time.monotonic() + timeout_s
        waiting = set(range(self.world.size))
        while waiting and time.monotonic() < deadline:
            waiting = {r for r in waiting if not self._arrived(f"{self.prefix}/reported/{r}")}
            if waiting:
                time.sleep(POLL_S)
        reports: dict[int, RankReport | None] = {}
        for rank in range(self.world.size):
            if rank in waiting:
                reports[rank] = None
                continue
            try:
                reports[rank] = RankReport.from_json(self.store.get(f"{self.prefix}/report/{rank}"))
            except (ValueError, TypeError, KeyError) as exc:
                reports[rank] = RankReport(rank, "", "", [], error=f"unreadable report: {exc}")
        return reports

    def publish_verdict(self, code: int, ack_timeout_s: float = ACK_TIMEOUT_S) -> None:
        """Rank 0: the exit code for every rank; then wait until every rank that reported has
        read it, because rank 0 hosts the store and its exit closes it under the others."""
        self.store.set(f"{self.prefix}/verdict", str(code))
        self.store.add(f"{self.prefix}/decided", 1)
        others = range(1, self.world.size)
        waiting = {r for r in others if self._arrived(f"{self.prefix}/reported/{r}")}
        deadline = time.monotonic() + ack_timeout_s
        while waiting and time.monotonic() < deadline:
            waiting = {r for r in waiting if not self._arrived(f"{self.prefix}/acknowledged/{r}")}
            if waiting:
                time.sleep(POLL_S / 4)

    def leave_without_verdict(self) -> None:
        """A rank that reported its failure and leaves now: rank 0 need not wait for it."""
        self.store.add(f"{self.prefix}/acknowledged/{self.world.rank}", 1)

    def await_verdict(self, timeout_s: float) -> int | None:
        """Other ranks: rank 0's exit code (acknowledged, so rank 0 may leave), or None when it
        did not decide in time. Losing the store is one line naming this rank."""
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self._arrived(f"{self.prefix}/decided"):
                    code = int(self.store.get(f"{self.prefix}/verdict"))
                    self.store.add(f"{self.prefix}/acknowledged/{self.world.rank}", 1)
                    return code
                time.sleep(POLL_S)
        except Exception as exc:  # noqa: BLE001  (the store's client raises several types)
            first = (str(exc).strip().splitlines() or [""])[0]
            raise RanksError(
                f"rank {self.world.rank} lost the job's store before it read rank 0's verdict "
                f"({type(exc).__name__}: {first})",
                hint="rank 0's output has the verdict; see its workerlog.0",
            ) from None
        return None


def paddle_store() -> Store:
    """The TCPStore of the launcher's job; initializes the parallel env when the caller has not.

    Imported here only: a world of one never loads Paddle.
    """
    import paddle.distributed as dist  # noqa: PLC0415  (optional, heavy)
    from paddle.base import core  # noqa: PLC0415

    if not dist.is_initialized():
        dist.init_parallel_env()
    store: Store = core.create_or_get_global_tcp_store()
    return store
