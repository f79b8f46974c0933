"""TCP proxies that play a network's faults between a party and the chain or its peers, for fault drills.

Why a proxy rather than the kernel's traffic control: ``netem`` needs the ``sch_netem`` module, which containers and
CI runners often lack, while a user-space proxy on the path changes nothing else of the setup. All proxies of a
drill share one event-loop thread; each accepted connection opens its own upstream connection and two pumps copy
bytes each way, so a stream keeps TCP's order and end-of-file.

* :class:`HoldingProxies` hold every connection on demand: while held, no byte moves either way and new connections
  wait before reaching their target, as TCP streams behave across a partition (the sender's retransmissions get
  through once it heals; an application's own timeouts still fire).
* :class:`LossyProxies` delay each chunk by a one-way latency with jitter, in order, and a share of chunks by a
  retransmission timeout more, as a lossy wide-area link looks to TCP's user.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Awaitable, Callable

Address = tuple[str, int]
"""A host and port."""


class TcpProxies:
    """Plain TCP proxies in one event-loop thread (subclasses change how bytes move: :meth:`_pump`)."""

    def __init__(self, name: str = "tcp-proxies") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()
        self.servers: list[asyncio.AbstractServer] = []

    def add(self, listen: Address, target: Address) -> None:
        """A proxy listening on ``listen`` that forwards each connection to ``target``."""

        async def start() -> None:
            self.servers.append(await asyncio.start_server(self._handler(target), *listen))

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    async def _admit(self) -> None:
        """Awaited before a new connection reaches its target."""

    def _handler(self, target: Address) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._admit()
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

        return handle

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction of a connection until end-of-file, then pass the end on."""
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                chunk = await reader.read(65536)
                await self._before_write()
                if not chunk:
                    if writer.can_write_eof():
                        writer.write_eof()
                    break
                writer.write(chunk)
                await writer.drain()
        writer.close()

    async def _before_write(self) -> None:
        """Awaited between reading a chunk and writing it on."""

    def close(self) -> None:
        """Stop every proxy and the loop thread: open connections are dropped, their pumps cancelled and awaited
        (a pump left pending when the loop stops would be finalised later, outside any loop)."""

        async def shut() -> None:
            for server in self.servers:
                server.close()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        if self.thread.is_alive():
            with contextlib.suppress(TimeoutError):
                asyncio.run_coroutine_threadsafe(shut(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()


class HoldingProxies(TcpProxies):
    """Proxies that :meth:`hold` every connection, as across a partition, until :meth:`release` (module docstring)."""

    def __init__(self) -> None:
        super().__init__("holding-proxies")
        self._open = asyncio.Event()
        self.loop.call_soon_threadsafe(self._open.set)

    def hold(self) -> None:
        self.loop.call_soon_threadsafe(self._open.clear)

    def release(self) -> None:
        self.loop.call_soon_threadsafe(self._open.set)

    async def _admit(self) -> None:
        await self._open.wait()

    async def _before_write(self) -> None:
        await self._open.wait()

    def close(self) -> None:
        self.release()
        super().close()


class LossyProxies(TcpProxies):
    """Proxies that deliver each chunk ``one_way`` +- ``jitter`` seconds after it was read, in order, and with
    probability ``loss`` ``rto`` seconds later still; ``delayed`` counts the chunks so held back."""

    def __init__(self, seed: int, one_way: float, jitter: float, loss: float, rto: float) -> None:
        super().__init__("lossy-proxies")
        self.rng = random.Random(seed)
        self.one_way, self.jitter, self.loss, self.rto = one_way, jitter, loss, rto
        self.delayed = 0

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                at, chunk = await queue.get()
                await asyncio.sleep(max(0.0, at - self.loop.time()))
                if chunk is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        last = 0.0
        try:
            while True:
                chunk = await reader.read(65536)
                delay = self.one_way + self.rng.uniform(-self.jitter, self.jitter)
                if chunk and self.rng.random() < self.loss:
                    delay += self.rto
                    self.delayed += 1
                last = max(last, self.loop.time() + delay)  # in order: never before the chunk ahead of it
                await queue.put((last, chunk or None))
                if not chunk:
                    break
        except (ConnectionError, OSError):
            await queue.put((last, None))
        with contextlib.suppress(ConnectionError, OSError):
            await sender
        writer.close()
