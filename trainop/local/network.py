"""One network namespace per run holding only loopback, so what the replicas listen on stays on this machine,
and one mount namespace with this machine's socket folders hidden.

Frameworks bind their rendezvous to every interface whatever address they are given (torch's TCPStore,
JAX's coordinator), unauthenticated. On a cluster the pod network keeps them in; here a network namespace
does: every process of the run enters the same one, so the replicas still reach each other on 127.0.0.1
and nothing outside it reaches them. An unprivileged user gets the namespace through a user namespace of
their own, mapping only their uid and gid (files keep their owner, and a process is not root inside).

The mount namespace is a copy of this machine's, with an empty tmpfs over each folder of Unix sockets
(trainop.local.sandbox.hidden_folders: /run, where docker.sock and the session's agents live, and the
folder of $SSH_AUTH_SOCK), so a replica cannot ask the Docker daemon or the user's ssh agent to act for
it. Through a user namespace a process of the run has no capability once it runs its command, so it
cannot unmount them; as root (no user namespace) it could: docs/local-confinement.md#sockets.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_REC, MS_PRIVATE = 0x4000, 0x40000
# A hidden folder is a small tmpfs of the run's own: writable (a program may expect /run/lock), bounded.
HIDING_TMPFS = b"size=1m,mode=0755"
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
# struct ifreq: the interface name, then a union whose first member here is the short `ifr_flags`.
IFREQ = struct.Struct("16sH22x")

_libc = ctypes.CDLL(None, use_errno=True)


class Unconfined(Exception):
    """This machine does not let this user make a network namespace; the message says why and what to do."""


def _call(name: str, *args: int) -> None:
    if getattr(_libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


def _mount(source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    if _libc.mount(source, target, fstype, ctypes.c_ulong(flags), data) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target.decode()}: {os.strerror(errno)}")


def _hide(folders: tuple[str, ...]) -> None:
    """In the new mount namespace: nothing mounted here reaches the machine's, and each folder is empty."""
    _mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    for folder in folders:
        _mount(b"trainop-hidden", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, HIDING_TMPFS)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        name = b"lo"
        _name, flags = IFREQ.unpack(fcntl.ioctl(sock, SIOCGIFFLAGS, IFREQ.pack(name, 0)))
        fcntl.ioctl(sock, SIOCSIFFLAGS, IFREQ.pack(name, flags | IFF_UP))


def _map_ids(uid: int, gid: int) -> None:
    """Map `uid` and `gid` (the caller's, read before the unshare: after it they show as unmapped) to
    themselves in the user namespace the caller just made, and nothing else."""
    # setgroups first (an unprivileged gid_map needs it; processes keep their groups, they only cannot
    # change them), and uid_map before gid_map: until the uid is mapped the kernel refuses the gid_map.
    for name, value in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)


def _hold(flags: int, hide: tuple[str, ...], ready: int, release: int) -> None:
    """In the forked child: make the namespaces, say so, then live until the parent has opened them."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        _call("unshare", flags)
        if flags & CLONE_NEWUSER:
            _map_ids(uid, gid)
        if flags & CLONE_NEWNS:
            _hide(hide)
        _loopback_up()
        os.write(ready, b"0")
    except OSError as exc:
        os.write(ready, str(exc.strerror or exc).encode())
        return
    os.read(release, 1)


@dataclass
class LoopbackNetwork:
    """The run's namespaces, held by open file descriptors; `enter` is what every process calls first.
    `hidden`: the folders its mount namespace (`mnt_fd`, if it has one) shows empty."""

    net_fd: int
    user_fd: int | None
    setup_seconds: float
    mnt_fd: int | None = None
    hidden: tuple[str, ...] = ()

    def enter(self) -> None:
        """Join the run's namespaces: in the child between fork and exec (subprocess's preexec_fn)."""
        if self.user_fd is not None:
            _call("setns", self.user_fd, CLONE_NEWUSER)
        if self.mnt_fd is not None:
            # Joining a mount namespace moves the process to its root; subprocess has already entered
            # the container's working directory, so come back to it (the same folder, by descriptor).
            here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                _call("setns", self.mnt_fd, CLONE_NEWNS)
                os.fchdir(here)
            finally:
                os.close(here)
        _call("setns", self.net_fd, CLONE_NEWNET)

    def close(self) -> None:
        # Processes still inside keep the namespace alive; it goes with the last of them.
        for fd in (self.net_fd, self.user_fd, self.mnt_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def loopback_network(user: bool | None = None, hide: tuple[str, ...] = ()) -> LoopbackNetwork:
    """A new network namespace with only `lo`, up, and with `hide` (absolute folders) a mount namespace
    where they are empty. `user`: through a user namespace of our own (the default unless we are root, who
    needs none). Raises Unconfined with the reason when the kernel refuses."""
    if sys.platform != "linux":
        raise Unconfined(f"network namespaces are a Linux feature and this is {sys.platform}")
    use_user = os.geteuid() != 0 if user is None else user
    flags = CLONE_NEWNET | (CLONE_NEWUSER if use_user else 0) | (CLONE_NEWNS if hide else 0)
    began = time.monotonic()
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(ready_r)
            os.close(release_w)
            _hold(flags, hide, ready_w, release_r)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(release_r)
    try:
        answer = os.read(ready_r, 4096).decode()
        if answer != "0":
            raise Unconfined(_why(answer or "no answer", use_user, bool(hide)))
        user_fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC) if use_user else None
        net_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        mnt_fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC) if hide else None
    finally:
        os.close(ready_r)
        os.close(release_w)
        os.waitpid(pid, 0)
    return LoopbackNetwork(net_fd, user_fd, time.monotonic() - began, mnt_fd, hide)


def _why(answer: str, user: bool, mounts: bool) -> str:
    if user:
        what = "a user, mount and network namespace" if mounts else "a user and network namespace"
        hint = (
            "unprivileged user namespaces are turned off or limited here (sysctls user.max_user_namespaces "
            "and user.max_net_namespaces, kernel.unprivileged_userns_clone on Debian kernels, "
            "kernel.apparmor_restrict_unprivileged_userns on Ubuntu)"
        )
    else:
        what = "a mount and network namespace" if mounts else "a network namespace"
        hint = "the sysctl user.max_net_namespaces (or user.max_mnt_namespaces) is reached"
    return (
        f"the kernel refused {what} ({answer}): {hint}, or a container or seccomp profile forbids unshare(2)"
    )
