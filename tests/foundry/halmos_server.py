"""A long-lived process that answers halmos's queries for ``halmos_solver.py``, so that a query does not pay for a
Python process with z3, cvc5 and Bitwuzla imported.

halmos runs its solver command once per query, about a thousand times for the split Shapley check; a process that
imports z3 costs 0.08 s before it reads the query, more than the integer step (``halmos_integers.py``) takes to answer
it. So ``halmos_solver.py QUERY`` sends the query's path over a Unix socket to this server, starting it on first use,
and prints what comes back. The server imports the solvers once and forks a child per query, which answers it as
``halmos_solver.py`` would in a process of its own (the same code, with its standard output the connection), so two
queries run side by side as two solver processes did. The socket is named after the solver's source files, so a
changed solver starts a server of its own; a server exits after ``IDLE_S`` without a query. Where no server can be
reached, the script answers the query itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

IDLE_S = 60.0
"""A server with no query for this long exits."""
START_S = 10.0
"""How long a query waits for a server it started to listen."""
CHILD_S = 600
"""A child still answering after this long is stopped, whatever its client does."""
WATCH_S = 0.2
"""How often a child looks whether its client still runs."""

HERE = Path(__file__).resolve().parent
SOURCES = ("halmos_solver.py", "halmos_integers.py", "halmos_server.py")


def address() -> Path:
    """The socket, named after the user, the interpreter and the solver's sources."""
    digest = hashlib.sha256(sys.executable.encode())
    for name in SOURCES:
        digest.update((HERE / name).read_bytes())
    return Path(tempfile.gettempdir()) / f"fgbdt-halmos-{os.getuid()}-{digest.hexdigest()[:16]}.sock"


def ask(args: list[str]) -> bool:
    """Have the server answer ``halmos_solver.py``'s arguments, its output printed; False if no server answers."""
    path = address()
    conn = connect(path)
    if conn is None:
        start(path)
        deadline = time.monotonic() + START_S
        while conn is None and time.monotonic() < deadline:
            time.sleep(0.02)
            conn = connect(path)
    if conn is None:
        return False
    with conn:
        request = {"pid": os.getpid(), "args": [os.path.abspath(a) if a.endswith(".smt2") else a for a in args]}
        conn.sendall(json.dumps(request).encode() + b"\n")
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    output = b"".join(chunks)
    if not output:
        return False
    sys.stdout.buffer.write(output)
    return True


def connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def start(path: Path) -> None:
    """A server in a session of its own (it outlives the query that started it)."""
    import subprocess

    subprocess.Popen(
        [sys.executable, str(HERE / "halmos_server.py"), str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=HERE,
    )


def serve(path: Path) -> None:
    """Listen on ``path`` until idle; one server per path (a lock file beside it), the others exit at once."""
    import fcntl
    import signal

    lock = open(f"{path}.lock", "w")  # noqa: SIM115 (held for the server's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return
    sys.path.insert(0, str(HERE))
    import bitwuzla  # noqa: F401 (imported once, for every child)
    import cvc5  # noqa: F401
    import halmos_integers  # noqa: F401
    import halmos_solver
    import z3  # noqa: F401

    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    listener.settimeout(IDLE_S)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return
            if os.fork() == 0:
                try:
                    listener.close()
                    lock.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.alarm(CHILD_S)
                    answer(conn, halmos_solver.main)
                finally:
                    os._exit(0)
            conn.close()
    finally:
        path.unlink(missing_ok=True)


def answer(conn: socket.socket, main: Callable[[str, bool], int]) -> None:
    """In a child: read the arguments and answer with standard output on the connection (an error: no output, and
    the script answers the query itself).

    The child leads a process group of its own, with the Bitwuzla processes it starts, and ends that group when its
    client is gone: halmos stops a query that exceeds its timeout by killing the solver command's process tree, which
    holds the client but not the server's child.
    """
    import signal
    import threading

    os.setpgid(0, 0)
    conn.settimeout(START_S)
    data = b""
    while not data.endswith(b"\n") and (chunk := conn.recv(65536)):
        data += chunk
    request = json.loads(data)
    args, client = request["args"], request["pid"]

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            try:
                os.kill(client, 0)
            except ProcessLookupError:
                os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    conn.settimeout(None)
    os.dup2(conn.fileno(), 1)
    sys.stdout = os.fdopen(1, "w", closefd=False)
    squares = args[0] != "--without-squares"
    main(args[-1], squares)
    sys.stdout.flush()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
