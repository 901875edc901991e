# ruff: noqa: PTH103, PTH110, PTH112, PTH120, PTH123, PTH211, S108, S606
# (os-level calls on paths inside a mount namespace being built, standard library only)
"""Inside `unshare`'s new namespaces: build the view, drop every capability, run the command.

Standard library only, run as `python -I -S enter.py SPEC` (no site, no user paths).
It is pid 1 of the sandbox's pid namespace: it forwards SIGINT, SIGTERM and SIGHUP to
the command, reaps orphans, and exits with the command's status; when it exits, the
kernel kills every process left in the namespace (a daemon the run forked dies too).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import sys
from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
SYSCALLS = {
    "x86_64": {"pivot_root": 155, "capset": 126},
    "aarch64": {"pivot_root": 41, "capset": 91},
}
libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def _point(path: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            open(path, "w").close()


def _bind(source: str, target: str, writable: bool, *, device: bool = False) -> None:
    _point(target, os.path.isdir(source))
    mount(source, target, None, MS_BIND | MS_REC)
    locked = os.statvfs(target).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    flags = MS_REMOUNT | MS_BIND | locked | (0 if writable else MS_RDONLY)
    mount(None, target, None, flags | (0 if device else MS_NOSUID))


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0x1 | 0x40)  # IFF_UP | IFF_RUNNING
        fcntl.ioctl(sock, 0x8914, request)  # SIOCSIFFLAGS


def _drop_capabilities() -> None:
    numbers = SYSCALLS[os.uname().machine]
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.syscall(numbers["capset"], header, data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def build(spec: dict[str, Any]) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    new_root = str(spec["new_root"])  # an empty folder of gates' own temp folder
    mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")

    def inside(path: str) -> str:
        return new_root + path

    os.makedirs(inside("/proc"))
    mount("proc", inside("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for covered in ("sys", "sysrq-trigger", "irq", "bus"):  # as bwrap does: read-only
        path = inside(f"/proc/{covered}")
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            flags = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
    os.makedirs(inside("/dev"))
    mount("tmpfs", inside("/dev"), "tmpfs", MS_NOSUID, "mode=0755")
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        _bind(f"/dev/{node}", inside(f"/dev/{node}"), True, device=True)
    for device in spec["devices"]:
        _bind(device, inside(device), True, device=True)
    os.makedirs(inside("/dev/shm"))
    mount("tmpfs", inside("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec['shm_bytes']}")
    for folder in spec["tmpfs"]:
        os.makedirs(inside(folder), exist_ok=True)
        mount("tmpfs", inside(folder), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for text, link in spec["symlinks"]:
        os.makedirs(os.path.dirname(inside(link)), exist_ok=True)
        os.symlink(text, inside(link))
    for source, target, writable in spec["binds"]:
        _bind(source, inside(target), writable)
    os.chdir(new_root)
    _check(libc.syscall(SYSCALLS[os.uname().machine]["pivot_root"], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")
    if not spec["network"]:
        _loopback_up()


def main() -> int:
    spec = json.loads(sys.argv[1])
    build(spec)
    os.chdir(str(spec["cwd"]))
    command = [str(part) for part in spec["command"]]
    child = os.fork()
    if child == 0:
        _drop_capabilities()
        try:
            os.execvp(command[0], command)  # the environment the launcher was given
        except OSError as exc:
            print(f"gates sandbox: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        pid, status = os.wait()
        if pid == child:
            return (
                os.waitstatus_to_exitcode(status)
                if os.WIFEXITED(status)
                else (128 + os.WTERMSIG(status))
            )


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as exc:
        print(f"gates sandbox: cannot build the view: {exc}", file=sys.stderr)
        sys.exit(125)
