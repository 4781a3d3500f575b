"""turnplan on a LangGraph Server with several worker processes, for the multi-worker test and
benchmark: one PostgreSQL (``pgserver``), one Redis (Debian's ``redis-server``), N workers of
``agent.app.server_worker`` (``langgraph-runtime-pg``), and the lockstep stub model.

The workers run in their own environment, ``.turnplan/mw-venv`` (``python -m bench.multiworker
setup``), because runtime-pg pins an older langgraph-api than the development one. This process
(pytest, the benchmark) talks to them only over HTTP with ``langgraph-sdk`` and reads turnplan's
tables with psycopg.

Turns are submitted as users would: each on its own thread, with the sync SDK client, default
durability (the server's: ``"async"``), created on the workers in turn; a client whose worker dies
waits on another one.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Durability

from tests.dev_server import REPO, SCRIPTED_MODEL
from tests.http_oracle import LockstepOracle
from tests.scripted_openai import ScriptedOpenAIServer

MW_VENV = REPO / ".turnplan" / "mw-venv"
"""The workers' environment (``python -m bench.multiworker setup`` creates it)."""
RUNTIME_PG = "langgraph-runtime-pg==0.11.1.post1"
STARTUP_SECONDS = 120
HEARTBEAT_SECONDS = "2"
"""``LG_BG_JOB_HEARTBEAT``: a dead worker's runs are taken over after about 4 to 8 s."""
_STRIPPED_PREFIXES = ("TURNPLAN_", "OPENAI_", "LANGGRAPH_", "LANGSERVE_", "LANGSMITH_")


def mw_python() -> Path:
    """The workers' Python interpreter."""
    return MW_VENV / "bin" / "python"


def mw_ready() -> bool:
    """Whether the workers' environment exists and has the runtime."""
    return mw_python().exists() and any(
        (MW_VENV / "lib").glob("python3*/site-packages/langgraph_runtime_pg")
    )


def setup_venv(venv: Path = MW_VENV, *, quiet: bool = True) -> None:
    """Create the workers' environment: runtime-pg (with its langgraph-api) and this project with
    its PostgreSQL extra, editable, so workers run the working tree's code."""
    if not (venv / "bin" / "python").exists():
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            *(["-q"] if quiet else []),
            RUNTIME_PG,
            "-e",
            f"{REPO}[postgres]",
        ],
        check=True,
    )


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes], *, timeout: float = 15) -> None:
    """End a process group we started: SIGTERM, then SIGKILL."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def postgres(folder: Path) -> Iterator[Any]:
    """A PostgreSQL server (``pgserver``) on a Unix socket in ``folder``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset (as in CI)
        pgserver = importlib.import_module("pgserver")  # untyped: its names are not exported
        server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()


@contextmanager
def redis(folder: Path) -> Iterator[str]:
    """A Redis server on 127.0.0.1 with no persistence; yields its URI."""
    executable = shutil.which("redis-server")
    if executable is None:
        raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
    port = free_port()
    log = folder / "redis.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [
                *(executable, "--port", str(port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass  # not listening yet: ask again until the deadline
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}"
    finally:
        _stop(process)


@dataclass
class Worker:
    """One worker process (``python -m agent.app.server_worker``) and where it listens."""

    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its API base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """Whether its process is running."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or an out-of-memory kill ends it: no shutdown of any kind."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, chars: int = 3000) -> str:
        """The end of its log, for assertion messages."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@dataclass
class Cluster:
    """PostgreSQL, Redis, the stub model and the workers of one test or benchmark."""

    folder: Path
    database_uri: str
    """The server's own database (threads, runs, checkpoints)."""
    turnplan_url: str
    """turnplan's database (rows, turns, tasks), as SQLAlchemy sees it."""
    redis_uri: str
    model: ScriptedOpenAIServer
    jobs: int
    heartbeat: str = HEARTBEAT_SECONDS
    workers: list[Worker] = field(default_factory=list)

    @property
    def turnplan_dsn(self) -> str:
        """turnplan's database for psycopg."""
        return self.turnplan_url.replace("postgresql+asyncpg://", "postgresql://")

    def environment(self) -> dict[str, str]:
        """A worker's environment: the machine's, without any turnplan, model or server
        settings, plus the cluster's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
        env.update(
            DATABASE_URI=self.database_uri,
            REDIS_URI=self.redis_uri,
            TURNPLAN_DATABASE_URL=self.turnplan_url,
            TURNPLAN_MODEL=SCRIPTED_MODEL,
            TURNPLAN_TASKS_DIR=str(self.folder / "tasks"),
            OPENAI_BASE_URL=self.model.base_url,
            OPENAI_API_KEY="test-key",
            LG_BG_JOB_HEARTBEAT=self.heartbeat,
            LANGSMITH_TRACING="false",
            PYTHONUNBUFFERED="1",
        )
        return env

    def start_worker(self, worker: Worker) -> Worker:
        """Start (or restart) ``worker`` and wait until it answers ``/ok``."""
        with worker.log.open("a") as output:
            worker.process = subprocess.Popen(
                [
                    *(
                        str(mw_python()),
                        "-m",
                        "agent.app.server_worker",
                        "--port",
                        str(worker.port),
                    ),
                    *("--jobs", str(self.jobs), "--config", str(REPO / "langgraph.json")),
                ],
                cwd=REPO,
                env=self.environment(),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if worker.process.poll() is not None:
                raise RuntimeError(f"worker {worker.name} exited:\n{worker.log_tail()}")
            try:
                if httpx.get(f"{worker.url}/ok", timeout=2).status_code == 200:
                    return worker
            except httpx.HTTPError:
                pass  # not serving yet: ask again until the deadline
            time.sleep(0.25)
        raise RuntimeError(f"worker {worker.name} did not start:\n{worker.log_tail()}")

    def add_worker(self) -> Worker:
        """Start one more worker."""
        name = f"w{len(self.workers) + 1}"
        worker = Worker(name, free_port(), self.folder / f"{name}.log")
        self.workers.append(worker)
        return self.start_worker(worker)

    def live_urls(self) -> list[str]:
        """The URLs of the workers still running."""
        return [w.url for w in self.workers if w.alive]

    def stop(self) -> None:
        """Stop every worker."""
        for worker in self.workers:
            if worker.process is not None:
                _stop(worker.process)


@contextmanager
def cluster(folder: Path, *, workers: int, jobs: int) -> Iterator[Cluster]:
    """PostgreSQL, Redis, the stub model server and ``workers`` started workers."""
    if not mw_ready():
        raise RuntimeError(f"{MW_VENV} is missing: run `python -m bench.multiworker setup` first")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tasks").mkdir(exist_ok=True)
    socket_dir = Path(f"/tmp/mwpg-{uuid.uuid4().hex[:8]}")  # a Unix socket path must be short
    socket_dir.mkdir()
    try:
        with (
            postgres(socket_dir) as pg,
            redis(folder) as redis_uri,
            ScriptedOpenAIServer() as model,
        ):
            pg.psql("CREATE DATABASE server;")
            pg.psql("CREATE DATABASE turnplan;")
            group = Cluster(
                folder=folder,
                database_uri=f"postgresql://postgres:@/server?host={socket_dir}",
                turnplan_url=f"postgresql+asyncpg://postgres@/turnplan?host={socket_dir}",
                redis_uri=redis_uri,
                model=model,
                jobs=jobs,
            )
            try:
                for _ in range(workers):
                    group.add_worker()
                yield group
            finally:
                group.stop()
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


@dataclass
class TurnOutcome:
    """How one submitted turn ended, as its client saw it."""

    key: str
    thread_id: str = ""
    run_id: str = ""
    run_status: str = ""
    turn_status: str | None = None
    tool_errors: int | None = None
    error: str = ""


def request_text(key: str, rows: int) -> str:
    """The user's message of turn ``key`` (the lockstep oracle reads ``turn <key>``)."""
    return f"Do these {rows} things for turn {key}."


def run_turn(
    urls: Sequence[str],
    index: int,
    key: str,
    rows: int,
    timeout: float,
    durability: Durability | None = None,
) -> TurnOutcome:
    """Create a thread and a run on ``urls[index % len]``, wait for it (moving to another worker
    if this one stops answering), and read how it ended. ``durability`` None: the server's."""
    outcome = TurnOutcome(key)
    order = [urls[(index + i) % len(urls)] for i in range(len(urls))]
    deadline = time.monotonic() + timeout
    try:
        with get_sync_client(url=order[0]) as client:
            thread = client.threads.create()
            outcome.thread_id = thread["thread_id"]
            message = {"role": "user", "content": request_text(key, rows)}
            turn_input: dict[str, Any] = {"messages": [message]}
            run = client.runs.create(
                outcome.thread_id,
                "supervisor",
                input=turn_input,
                context={"user_id": f"user-{key}"},
                durability=durability,  # None is left out: the server's default
            )
            outcome.run_id = run_id = run["run_id"]
        attempt = 0
        while True:
            url = order[attempt % len(order)]
            try:
                with get_sync_client(url=url, timeout=(30, timeout, 30, 30)) as client:
                    run = client.runs.get(outcome.thread_id, outcome.run_id)
                    if run["status"] in ("pending", "running"):
                        # The join request itself, without the SDK's reconnects to the same
                        # worker (about 17 s of back-off when that worker is dead).
                        client.http.get(f"/threads/{outcome.thread_id}/runs/{run_id}/join")
                        run = client.runs.get(outcome.thread_id, outcome.run_id)
                    if run["status"] not in ("pending", "running"):
                        outcome.run_status = run["status"]
                        values = client.threads.get_state(outcome.thread_id)["values"] or {}
                        assert isinstance(values, dict)
                        outcome.turn_status = values.get("turnStatus")
                        outcome.tool_errors = values.get("toolErrors")
                        return outcome
            except (httpx.HTTPError, OSError):
                attempt += 1  # this worker is gone (or busy): ask the next one
                time.sleep(0.5)
            if time.monotonic() > deadline:
                outcome.error = f"still {run['status']} after {timeout:.0f} s"
                return outcome
    except Exception as error:  # reported per turn, so one failure does not hide the others
        outcome.error = f"{type(error).__name__}: {error}"[:500]
    return outcome


def submit_turns(
    urls: Sequence[str],
    keys: Sequence[str],
    rows: int,
    *,
    timeout: float = 300,
    durability: Durability | None = None,
) -> list[TurnOutcome]:
    """Run every turn at once, each on its own thread, and return how each ended."""
    outcomes: list[TurnOutcome | None] = [None] * len(keys)

    def one(i: int) -> None:
        outcomes[i] = run_turn(urls, i, keys[i], rows, timeout, durability)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(keys))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 60)
    return [
        o if o is not None else TurnOutcome(k, error="client hung")
        for o, k in zip(outcomes, keys, strict=True)
    ]


@dataclass(frozen=True)
class Damage:
    """What turnplan's tables show about a set of turns, against what a clean run leaves."""

    forks: int
    """Turns whose id contains ``/fork-``: a run took its own turn for a Studio fork."""
    duplicates: int
    """Tasks added more than once (the extra copies): a side effect repeated."""
    missing: int
    """Rows' tasks never added: a side effect lost."""
    open_rows: int
    """Rows left ``pending`` or ``in_progress``."""
    missing_titles: tuple[str, ...] = ()
    """The titles of the tasks never added, to look the turns up."""

    @property
    def clean(self) -> bool:
        """Nothing twice, nothing lost, nothing left open, no fork."""
        return not (self.forks or self.duplicates or self.missing or self.open_rows)


def damage(dsn: str, outcomes: Sequence[TurnOutcome], oracle: LockstepOracle) -> Damage:
    """Count forks, duplicate and missing tasks and open rows of these turns."""
    threads = [o.thread_id for o in outcomes if o.thread_id]
    titles = [t for o in outcomes for t in oracle.titles(o.key)]
    with psycopg.connect(dsn) as connection:
        forks = connection.execute(
            """SELECT count(*) FROM turns WHERE "conversationId" = ANY(%s)
               AND "turnId" LIKE %s""",
            (threads, "%/fork-%"),
        ).fetchone()
        counts: dict[str, int] = dict(
            connection.execute(
                "SELECT title, count(*) FROM tasks WHERE title = ANY(%s) GROUP BY title",
                (titles,),
            ).fetchall()
        )
        open_rows = connection.execute(
            """SELECT count(*) FROM turn_todos WHERE "conversationId" = ANY(%s)
               AND status IN ('pending', 'in_progress')""",
            (threads,),
        ).fetchone()
    assert forks is not None and open_rows is not None
    return Damage(
        forks=int(forks[0]),
        duplicates=sum(n - 1 for n in counts.values() if n > 1),
        missing=sum(1 for t in titles if t not in counts),
        open_rows=int(open_rows[0]),
        missing_titles=tuple(t for t in titles if t not in counts),
    )


def runs_taken_over(database_uri: str, outcomes: Sequence[TurnOutcome]) -> int:
    """How many of these runs a worker claimed more than once (runtime-pg counts every claim of
    a run in ``retry_counters``): the runs a killed worker had in flight."""
    runs = [o.run_id for o in outcomes if o.run_id]
    with psycopg.connect(database_uri) as connection:
        row = connection.execute(
            "SELECT count(*) FROM retry_counters WHERE run_id::text = ANY(%s) AND count > 1",
            (runs,),
        ).fetchone()
    assert row is not None
    return int(row[0])


@dataclass
class KillSwitch:
    """Kills one worker with SIGKILL once the stub model has sent ``after_answers`` answers,
    ``delay`` seconds later (the window after a burst is a few tens of milliseconds)."""

    worker: Worker
    after_answers: int
    delay: float = 0.0
    killed_at: float | None = None
    _armed: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, answers: int) -> None:
        with self._lock:
            if not self._armed or answers < self.after_answers:
                return
            self._armed = False
        threading.Timer(self.delay, self._kill).start()

    def _kill(self) -> None:
        self.worker.kill()
        self.killed_at = time.monotonic()


@dataclass
class RoundResult:
    """One round: turns submitted together, one worker killed mid-turn, and what it left."""

    number: int
    burst: int
    delay: float
    killed: str
    outcomes: list[TurnOutcome]
    damage: Damage
    seconds: float
    """From submitting the turns until the last one ended."""
    after_kill: float | None
    """From the kill until the last turn ended (the killed worker's runs taken over)."""
    taken_over: int
    """Runs that were claimed more than once: the killed worker's runs in flight, run again."""

    @property
    def failures(self) -> list[TurnOutcome]:
        """Turns that did not end ``success`` and ``answered`` with no tool error."""
        return [
            o
            for o in self.outcomes
            if o.error
            or o.run_status != "success"
            or o.turn_status != "answered"
            or o.tool_errors not in (0, None)
        ]

    def line(self) -> str:
        """One line for the log: the round's counts."""
        d = self.damage
        return (
            f"round {self.number}: kill {self.killed} after burst {self.burst} "
            f"+{self.delay * 1000:.0f} ms; {len(self.outcomes)} turns in {self.seconds:.1f} s "
            f"({self.after_kill or 0:.1f} s after the kill, {self.taken_over} runs taken over); "
            f"forks {d.forks}, duplicates {d.duplicates}, missing {d.missing}, "
            f"open rows {d.open_rows}, failed turns {len(self.failures)}"
        )


def kill_round(
    group: Cluster,
    number: int,
    *,
    turns: int,
    rows: int,
    burst: int,
    delay: float,
    durability: Durability | None = None,
) -> RoundResult:
    """Submit ``turns`` turns in step, SIGKILL one worker ``delay`` s after the stub model's
    ``burst``-th burst of answers, let the other workers finish, restart the killed one."""
    for worker in group.workers:
        if not worker.alive:
            group.start_worker(worker)
    victim = group.workers[number % len(group.workers)]
    switch = KillSwitch(victim, after_answers=burst * turns, delay=delay)
    oracle = LockstepOracle(expected=turns, rows=rows, on_answer=switch)
    group.model.respond_with(oracle)
    keys = [f"r{number}t{i}" for i in range(turns)]
    started = time.monotonic()
    outcomes = submit_turns([w.url for w in group.workers], keys, rows, durability=durability)
    ended = time.monotonic()
    return RoundResult(
        number=number,
        burst=burst,
        delay=delay,
        killed=victim.name if switch.killed_at is not None else "none",
        outcomes=outcomes,
        damage=damage(group.turnplan_dsn, outcomes, oracle),
        seconds=ended - started,
        after_kill=None if switch.killed_at is None else ended - switch.killed_at,
        taken_over=runs_taken_over(group.database_uri, outcomes),
    )
