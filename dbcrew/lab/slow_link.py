"""A slow network between a client and a server: a TCP relay on 127.0.0.1 that holds every reply for a while.

A target far away, behind a saturated link or a starved proxy, answers each round trip late; a client
that makes N round trips waits at least N times the delay, on any host, fast or slow. The tests use it
to make a watcher's round last longer than its lease for real (the target's own PostgreSQL, its own
protocol), with no timer in the product and no mock of it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHUNK = 65536


@contextmanager
def slow_link(host: str, port: int, delay: float) -> Iterator[int]:
    """Relay connections from a local port (yielded) to `host:port`, holding each chunk the server sends for `delay`
    seconds (the client's bytes go through at once); the relay and its connections end with the block."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    done = threading.Event()
    sockets: list[socket.socket] = [listener]

    def pump(source: socket.socket, sink: socket.socket, hold: float) -> None:
        try:
            while chunk := source.recv(CHUNK):
                if hold:
                    time.sleep(hold)
                sink.sendall(chunk)
        except OSError:
            pass  # either side closed: the relay of this connection is over
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the other direction

    def accept() -> None:
        while not done.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener closed at the end of the block
            server = socket.create_connection((host, port))
            sockets.extend([client, server])
            for args in ((client, server, 0.0), (server, client, delay)):
                threading.Thread(target=pump, args=args, name="slow-link", daemon=True).start()

    acceptor = threading.Thread(target=accept, name="slow-link-accept", daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        acceptor.join()
        for s in sockets:
            s.close()
