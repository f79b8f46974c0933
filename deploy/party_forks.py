"""Party processes forked from one process that has already loaded a node.

A party node imports web3, eth-account, FastAPI and numba and loads its compiled kernels before it does any work:
1.5 s of CPU. Four parties started as four interpreters at once on two cores spent 3-4 s of a 22 s training run on
that alone. ``fgbdt train`` plays every party on one machine, so it starts one server process that loads a node once
and forks each party from it: each child is still its own process, with its own key, shard, log, endpoint and chain
connection, running ``fgbdt node`` exactly as a party on another machine would.

The server is one thread on purpose: a fork copies only the forking thread, and a lock held by any other thread at
that moment would stay held in the child forever. It answers on its standard output, one JSON object per line:
``{"loaded": true}`` once a node is loaded (forks asked for earlier wait for it), ``{"started": pid, "id": n}`` per
fork (``n`` the request's id) and ``{"exited": pid, "code": c}`` when a child ends (``c`` as ``subprocess`` gives it:
negative for a signal). It ignores
Ctrl-C (the parties, in the same process group, get it and end; the server reports how) and exits when its standard
input closes and its children have ended.

Elsewhere than on Linux (``fork_available``), ``start_party`` starts a fresh interpreter per party, as before.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NODE_COMMAND = ("-m", "fgbdt_chain.deploy.cli")
"""How a party node is started as a fresh interpreter (``sys.executable`` first); the forks run the same CLI."""

REAP_INTERVAL = 0.05
"""Seconds between the server's checks for ended children: how late at most an exit is reported."""


class PartyForksError(RuntimeError):
    """The fork server could not start or fork, or ended before a party it forked (whose exit code is then unknown)."""


class ForkedParty:
    """A party process forked by the server, handled like ``subprocess.Popen``: ``poll``, ``wait``, signals."""

    def __init__(self, forks: PartyForks, pid: int) -> None:
        self.forks, self.pid = forks, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.forks.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        with self.forks.changed:
            while self.poll() is None:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"party process {self.pid}", timeout or 0.0)
                self.forks.changed.wait(REAP_INTERVAL if left is None else min(left, REAP_INTERVAL))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        try:
            running = self.poll() is None  # once reaped, the pid may belong to another process
        except PartyForksError:
            return  # it ended after the server did
        if running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


Party = subprocess.Popen[bytes] | ForkedParty
"""A running party process, however it was started."""


class PartyForks:
    """The requester's side of the fork server: starts it (it loads while the task is opened), forks parties.

    One server serves one task: closing it ends the server once its children have ended. Start it as early as the
    caller can (``fgbdt train`` does before it reads the data), so that the loading overlaps the caller's own work;
    ``wait_loaded`` says how long the loading took."""

    def __init__(self, log_path: Path) -> None:
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self.started_at = time.monotonic()
        self.loaded_at: float | None = None
        """When the server said it had loaded a node (``time.monotonic``), None before."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fgbdt_chain.deploy.party_forks"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self.log_path = log_path
        self.changed = threading.Condition()
        self._requests = 0
        self._starting = threading.Lock()
        """One fork request at a time: each waits for the answer with its own id."""
        self._started: dict[int, int] = {}
        self._abandoned: set[int] = set()
        """Requests given up on (timed out): their children are killed when the server reports them."""
        self._exits: dict[int, int] = {}
        self._gone = False
        self._reader = threading.Thread(target=self._read, name="party forks", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            for line in self.process.stdout:
                message = json.loads(line)
                with self.changed:
                    if "loaded" in message:
                        self.loaded_at = time.monotonic()
                    elif "started" in message:
                        pid, request = int(message["started"]), int(message["id"])
                        self._exits.pop(pid, None)  # a pid the kernel gave again: the old exit is not this one's
                        if request in self._abandoned:
                            self._abandoned.discard(request)
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGKILL)
                        else:
                            self._started[request] = pid
                    elif "exited" in message:
                        self._exits[int(message["exited"])] = int(message["code"])
                    self.changed.notify_all()
        finally:  # however the reading ended, nobody waits on a server that no longer answers
            with self.changed:
                self._gone = True
                self.changed.notify_all()

    def wait_loaded(self, timeout: float = 120.0) -> float:
        """Wait until the server has loaded a node; the seconds from its start to then (interpreter, imports,
        compiled kernels): the start-up a party pays before any work, which the caller may time apart."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.loaded_at is None:
                if self._gone:
                    raise PartyForksError(self._failure())
                if time.monotonic() > deadline:
                    raise PartyForksError(f"the party fork server did not load a node within {timeout:.0f} s")
                self.changed.wait(REAP_INTERVAL)
            return self.loaded_at - self.started_at

    def start(self, args: Sequence[str], log_path: Path, timeout: float = 120.0) -> ForkedParty:
        """Fork a party running ``fgbdt <args>``, its output appended to ``log_path``."""
        assert self.process.stdin is not None
        deadline = time.monotonic() + timeout
        with self._starting, self.changed:
            if self._gone:
                raise PartyForksError(self._failure())
            self._requests += 1
            request = self._requests
            line = json.dumps({"id": request, "args": list(args), "log": str(log_path)}).encode() + b"\n"
            try:
                self.process.stdin.write(line)
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:  # gone before the reader saw it, or closed by close()
                raise PartyForksError(self._failure()) from exc
            while request not in self._started:
                if self._gone:
                    raise PartyForksError(self._failure())
                if time.monotonic() > deadline:
                    self._abandoned.add(request)
                    raise PartyForksError(f"the party fork server did not fork within {timeout:.0f} s")
                self.changed.wait(REAP_INTERVAL)
            return ForkedParty(self, self._started.pop(request))

    def exit_code(self, pid: int) -> int | None:
        """The child's exit code once it ended, None while it runs. After the server itself ended, its children went
        to init: one still running is None, one that ended has no known exit code (PartyForksError)."""
        with self.changed:
            if pid in self._exits:
                return self._exits[pid]
            if not self._gone:
                return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise PartyForksError(
                f"party process {pid} ended after the fork server did; its exit code is unknown ({self._failure()})"
            ) from None
        return None

    def _failure(self) -> str:
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:] if self.log_path.exists() else []
        return f"the party fork server exited (code {self.process.poll()}): " + " | ".join(tail)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the server once its children are stopped (so their CPU time is counted as its own is). A server never
        asked to fork (its caller failed first) is killed: no child to wait for, no loading to finish. Again: no-op."""
        if self._requests == 0 and self.process.poll() is None:
            self.process.kill()
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=timeout)
        self._log.close()


def start_party(forks: PartyForks | None, args: Sequence[str], log_path: Path) -> Party:
    """A party process running ``fgbdt <args>``: forked by ``forks``, or a fresh interpreter without one."""
    if forks is not None:
        return forks.start(args, log_path)
    out = open(log_path, "ab")  # noqa: SIM115 - owned by the child process
    return subprocess.Popen([sys.executable, *NODE_COMMAND, *args], stdout=out, stderr=subprocess.STDOUT)


def fork_available() -> bool:
    """Whether parties are forked: on Linux. macOS has ``fork`` but system frameworks that numpy or the TLS stack
    may have loaded are not safe in a forked child (why Python's multiprocessing spawns there by default)."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


# ---------------------------------------------------------------------------------------------------------- server


def _load() -> None:
    """Everything a party node loads before it works: the command's modules, the compiled kernels, and what its
    endpoint imports on first use."""
    import fgbdt_chain.deploy.cmd_node  # noqa: F401
    from fgbdt_chain.node.party import endorse_server
    from fgbdt_chain.node.protocol.warmup import warm_up

    warm_up()
    endorse_server.warm_up()


def _send(out: int, message: dict[str, Any]) -> None:
    os.write(out, json.dumps(message).encode() + b"\n")


def _child(request: dict[str, Any], closing: Sequence[int]) -> None:
    """In the forked child: input from /dev/null, output to the party's log, the server's descriptors closed, then
    the command; never returns to the server's loop."""
    code = 1
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # in place of the request pipe
        os.dup2(log, 1)
        os.dup2(log, 2)
        for fd in {log, null, *closing} - {0, 1, 2}:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        from fgbdt_chain.deploy.cli import main

        sys.argv = ["fgbdt", *request["args"]]
        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:  # before the command caught it: the code it would have given
        code = 130
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(requests: int = 0, out: int = 1) -> None:
    """Load a node, then fork one child per request line until ``requests`` (a file descriptor) closes."""
    out = os.dup(out)  # the protocol's own descriptor: children get their log on 1 and 2 instead
    os.dup2(2, 1)  # anything the loading prints goes to the server's log, not into the protocol
    # Ctrl-C ends the parties, which the server then reports. Blocked, not ignored: a child inherits the mask, sets
    # its handler and unblocks, so a Ctrl-C that comes while it starts is delivered then, not lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    _load()
    sys.stdout.flush()  # a child must not inherit (and write into its log) what the loading left buffered
    sys.stderr.flush()
    # what the loading made lives as long as every child: kept out of the collector's scans (``gc.freeze``, as
    # Python's documentation advises before forking without exec), which also leaves those pages shared
    gc.collect()
    gc.freeze()
    _send(out, {"loaded": True})
    pending = b""
    children: set[int] = set()
    open_input = True
    while open_input or children:
        readable = select.select([requests], [], [], REAP_INTERVAL)[0] if open_input else []
        if not open_input:
            time.sleep(REAP_INTERVAL)
        if readable:
            chunk = os.read(requests, 1 << 16)
            if not chunk:
                open_input = False  # the requester is done: wait for the children it did not stop, then exit
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)  # parsed here: a child never runs the server's loop
                pid = os.fork()
                if pid == 0:
                    _child(request, (requests, out))
                children.add(pid)
                _send(out, {"started": pid, "id": request["id"]})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                with contextlib.suppress(BrokenPipeError):
                    _send(out, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve()
    # every child reaped and reported: the requester waits for this exit, and the interpreter's finalization of what
    # the loading made (numba, LLVM) took 0.05 s of it; the children skip it too (``_child``)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
