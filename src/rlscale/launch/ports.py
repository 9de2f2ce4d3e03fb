"""Whether a rendezvous port can still be taken on this host, asked before torchrun starts, and a free one for a
launcher that would otherwise take a fixed one.

torchrun reports a taken port as a long traceback from its agent, after which no rank starts to say anything; asked
first, the launcher names the port in one line instead. The answer can change before torchrun binds the port: this
catches a port held by another job, not a race with one starting at the same moment.
"""

from __future__ import annotations

import errno
import socket

TAKEN = (errno.EADDRINUSE, errno.EACCES)
"""Errors of ``bind`` that mean the port cannot be had here; any other (no IPv6 on the host) says nothing."""


def port_taken(port: int) -> str | None:
    """Why this host cannot listen on ``port`` (the OS's reason), or None when it can.

    Binds as torch's TCP store does: on every interface, IPv6 and IPv4 together where the host has IPv6, with
    ``SO_REUSEADDR`` so that a connection still closing from an earlier job does not count.
    """
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                sock.bind((address, port))
            except OSError as error:
                if error.errno in TAKEN:
                    return error.strerror or errno.errorcode[error.errno]
                continue
            return None
    return None


def free_local_port() -> int:
    """A localhost port that no one listens on now (the kernel's pick); a job started at once can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
