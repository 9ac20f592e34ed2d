"""A TCP proxy between Kafka clients and a broker that cuts connections on purpose.

It understands just enough of the Kafka framing (4-byte size, then api_key) to pick
Produce requests: every `cut_every`-th Produce request is forwarded to the broker, the
broker is given time to append it, and then both sockets are closed before the response
reaches the client. The client sees a lost connection and retries a batch that is
already in the log, which is exactly what an idempotent producer must survive.

The broker advertises the proxy's address, so every client connection goes through it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

PRODUCE = 0


def _recv_exact(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class FaultProxy:
    def __init__(self, listen_port: int, cut_every: int = 5, max_cuts: int = 30):
        self.listen_port = listen_port
        self.target_port: int | None = None
        self.cut_every = cut_every
        self.max_cuts = max_cuts
        self.faults = True
        self.produce_seen = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", listen_port))
        self._srv.listen(64)
        self._srv.settimeout(0.2)
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._srv.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._srv.accept()
            except (socket.timeout, OSError):
                continue
            if self.target_port is None:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            state = {"drop_responses": False}
            threading.Thread(target=self._client_to_broker, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._broker_to_client, args=(upstream, client, state), daemon=True).start()

    def _should_cut(self, api_key: int) -> bool:
        if api_key != PRODUCE or not self.faults:
            return False
        with self._lock:
            self.produce_seen += 1
            if self.cuts < self.max_cuts and self.produce_seen % self.cut_every == 0:
                self.cuts += 1
                return True
        return False

    def _client_to_broker(self, client: socket.socket, upstream: socket.socket, state: dict) -> None:
        try:
            while True:
                head = _recv_exact(client, 4)
                if head is None:
                    break
                (size,) = struct.unpack(">i", head)
                body = _recv_exact(client, size)
                if body is None:
                    break
                api_key = struct.unpack(">h", body[:2])[0]
                cut = self._should_cut(api_key)
                if cut:
                    state["drop_responses"] = True
                upstream.sendall(head + body)
                if cut:
                    time.sleep(0.2)  # let the broker append it
                    break
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _broker_to_client(self, upstream: socket.socket, client: socket.socket, state: dict) -> None:
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if state["drop_responses"]:
                    continue
                client.sendall(data)
        except OSError:
            pass
