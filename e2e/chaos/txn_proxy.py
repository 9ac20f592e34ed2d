"""A TCP proxy in front of one broker's client listener, for the chaos run's `end-txn` fault.

It runs in the broker's own network namespace (so the network faults hit it as they hit the
broker), listens where the broker's EXTERNAL listener is advertised and forwards each connection
to the broker. It reads the Kafka framing of what clients send (4-byte size, then api_key and
api_version) and leaves every request as it is but EndTxn (api key 26), which it delays or
duplicates while the control file says so:

    delay SECONDS   hold the EndTxn (and what the client sends after it on that connection, as a
                    slow network would) for SECONDS before passing it on
    dup SECONDS     pass it on, and SECONDS later send a copy on a connection of its own (a
                    retransmission that arrives late, maybe inside the producer's next
                    transaction: KAFKA-17754); the broker's answer to the copy is logged

One JSON line per EndTxn touched goes to --log: the transactional id, producer id and epoch,
commit or abort, the request version, what was done and (for copies) the error code answered.

    txn_proxy.py --listen HOST:PORT --to HOST:PORT --control FILE --log FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import time

END_TXN = 26


def parse_end_txn(body: bytes) -> dict:
    """The request's header and EndTxn fields (versions 0-5; 3+ are flexible)."""
    api_key, version, corr = struct.unpack(">hhi", body[:8])
    pos = 8
    (n,) = struct.unpack(">h", body[pos:pos + 2])
    pos += 2 + max(n, 0)  # client_id: a nullable string in every header version
    flexible = version >= 3

    def uvarint() -> int:
        nonlocal pos
        shift = v = 0
        while True:
            b = body[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    if flexible:
        for _ in range(uvarint()):  # header tagged fields
            uvarint()
            pos += uvarint()
        ln = uvarint() - 1
    else:
        (ln,) = struct.unpack(">h", body[pos:pos + 2])
        pos += 2
    tid = body[pos:pos + ln].decode(errors="replace")
    pos += ln
    pid, epoch, committed = struct.unpack(">qhb", body[pos:pos + 11])
    return {"version": version, "corr": corr, "tid": tid, "pid": pid, "epoch": epoch,
            "commit": bool(committed)}


def end_txn_error(version: int, payload: bytes) -> int:
    """The error code of an EndTxn response (after its size)."""
    pos = 4 + (1 if version >= 3 else 0)  # correlation id, then v1 header's tagged fields
    return struct.unpack(">h", payload[pos + 4:pos + 6])[0]  # after throttle_time_ms


class Proxy:
    def __init__(self, a):
        self.to_host, to_port = a.to.rsplit(":", 1)
        self.to_port = int(to_port)
        self.control = a.control
        self.logf = open(a.log, "a", buffering=1)

    def mode(self) -> tuple[str, float] | None:
        try:
            with open(self.control) as f:
                kind, secs = f.read().split()
            return kind, float(secs)
        except (OSError, ValueError):
            return None

    def log(self, d: dict) -> None:
        self.logf.write(json.dumps({"t": round(time.time(), 3), **d}) + "\n")

    async def replay(self, frame: bytes, info: dict, after: float) -> None:
        await asyncio.sleep(after)
        d = {**info, "action": "dup", "after": after}
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(self.to_host, self.to_port), 5)
            try:
                w.write(frame)
                await w.drain()
                (n,) = struct.unpack(">i", await asyncio.wait_for(r.readexactly(4), 15))
                d["error"] = end_txn_error(info["version"], await asyncio.wait_for(r.readexactly(n), 15))
            finally:
                w.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, struct.error) as e:
            d["error"] = f"no answer: {type(e).__name__}"
        self.log(d)

    async def client_to_broker(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            await self._client_to_broker(r, w)
        except (OSError, asyncio.IncompleteReadError):
            return

    async def _client_to_broker(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            head = await r.readexactly(4)
            (n,) = struct.unpack(">i", head)
            body = await r.readexactly(n)
            if n >= 4 and struct.unpack(">h", body[:2])[0] == END_TXN:
                m = self.mode()
                if m is not None:
                    try:
                        info = parse_end_txn(body)
                    except (struct.error, IndexError):
                        info = {"unparsed": True, "version": struct.unpack(">h", body[2:4])[0]}
                    kind, secs = m
                    if kind == "delay":
                        self.log({**info, "action": "delay", "seconds": secs})
                        await asyncio.sleep(secs)
                    elif kind == "dup":
                        asyncio.ensure_future(self.replay(head + body, info, secs))
            w.write(head + body)
            await w.drain()

    async def broker_to_client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                chunk = await r.read(1 << 16)
                if not chunk:
                    return
                w.write(chunk)
                await w.drain()
        except OSError:
            return

    async def handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            br, bw = await asyncio.wait_for(asyncio.open_connection(self.to_host, self.to_port), 5)
        except (OSError, asyncio.TimeoutError):
            cw.close()
            return
        tasks = [asyncio.ensure_future(self.client_to_broker(cr, bw)),
                 asyncio.ensure_future(self.broker_to_client(br, cw))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            for x in (cw, bw):
                x.close()


async def main(a) -> None:
    p = Proxy(a)
    host, port = a.listen.rsplit(":", 1)
    server = await asyncio.start_server(p.handle, host, int(port), reuse_address=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--to", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--log", required=True)
    asyncio.run(main(ap.parse_args()))
