"""Load generator for ``bench_labeling.py``: simulated labelers driving the labeling API.

Run by ``bench/bench_labeling.py`` in a separate process, as
``python bench/_loadgen.py SPEC.json``; prints one JSON object (raw latencies per
request kind, counts, errors, CPU use) on stdout.

It is lean on purpose, since it shares the 2 cores with gunicorn and PostgreSQL:
one asyncio loop, a minimal HTTP/1.1 client over keep-alive connections (one per
virtual user), no third-party packages. Every request goes to 127.0.0.1 and every
run stops by itself after ``warmup + duration`` seconds.

Modes
-----
paced
    Each virtual labeler submits a label (``POST /api/phases/<id>/labels/``),
    reads ``next`` from the response and fetches its display image, on an
    open-loop schedule of one image every ``interval`` seconds; every
    ``next_every``-th cycle it also asks ``GET /api/phases/<id>/next/``. As many
    virtual users hit ``/healthz`` on the same schedule, so the trivial view is
    measured under the same load.
saturate
    Each virtual labeler submits labels back to back (no think time).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import sys
import time
import uuid
from dataclasses import dataclass, field


class HTTPError(Exception):
    """The connection broke or the response could not be parsed."""


@dataclass
class Response:
    status: int
    body: bytes


@dataclass
class Conn:
    """One keep-alive HTTP/1.1 connection to ``host:port`` (reopened when the server closes it)."""

    host: str
    port: int
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    reconnects: int = 0

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Response:
        """Send one request; retry once on a fresh connection if a reused one was closed meanwhile."""
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body)}")
        raw = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (0, 1):
            reused = self.writer is not None
            if self.writer is None or self.reader.at_eof():
                if self.writer is not None:
                    self.close()
                    self.reconnects += 1
                await self._open()
                reused = False
            try:
                self.writer.write(raw)
                return await self._read()
            except (OSError, asyncio.IncompleteReadError, HTTPError):
                self.close()
                if attempt or not reused:
                    raise
                self.reconnects += 1
        raise AssertionError("unreachable")

    async def _read(self) -> Response:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError as exc:
            raise HTTPError("headers too long") from exc
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise HTTPError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = await self.reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")  # no trailers expected
                    break
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            body = b"".join(chunks)
        elif "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        else:
            body = await self.reader.read()  # until the server closes
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return Response(status, body)


@dataclass
class Stats:
    """Latencies (ms) of the requests sent inside the measured window, per kind."""

    t_record: float
    t_end: float
    latencies: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    late: int = 0
    slots: int = 0
    exhausted: int = 0
    image_bytes: int = 0

    def record(self, kind: str, t_send: float, t_done: float, status: int) -> None:
        if t_send < self.t_record or t_send >= self.t_end:
            return
        self.latencies.setdefault(kind, []).append((t_done - t_send) * 1000.0)
        by_status = self.statuses.setdefault(kind, {})
        by_status[str(status)] = by_status.get(str(status), 0) + 1

    def error(self, message: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(message)


async def timed(conn: Conn, stats: Stats, kind: str, method: str, path: str, headers, body=b"") -> Response | None:
    t0 = time.perf_counter()
    try:
        resp = await conn.request(method, path, headers, body)
    except (OSError, asyncio.IncompleteReadError, HTTPError, ValueError) as exc:
        stats.record(kind, t0, time.perf_counter(), 599)
        stats.error(f"{kind}: {type(exc).__name__}: {exc}")
        return None
    stats.record(kind, t0, time.perf_counter(), resp.status)
    if resp.status >= 400:
        stats.error(f"{kind}: HTTP {resp.status}: {resp.body[:200]!r}")
    return resp


class Labeler:
    """One simulated labeler with its token and its current image."""

    def __init__(self, spec: dict, user: dict, stats: Stats, rng: random.Random) -> None:
        self.conn = Conn(spec["host"], spec["port"])
        self.phase = spec["phase_id"]
        self.stats = stats
        self.rng = rng
        self.auth = {"Authorization": f"Token {user['token']}", "Accept": "application/json"}
        self.post_headers = {**self.auth, "Content-Type": "application/json"}
        self.image_id: int | None = None
        self.display_url: str | None = None

    def _take(self, assignment: dict | None) -> None:
        if assignment is None:
            self.image_id = self.display_url = None
        else:
            self.image_id = assignment["image"]["id"]
            self.display_url = assignment["image"]["display_url"]

    async def get_next(self, record: bool = True) -> bool:
        resp = await timed(
            self.conn, self.stats if record else _NULL, "next", "GET", f"/api/phases/{self.phase}/next/", self.auth
        )
        if resp is None or resp.status != 200:
            return False
        self._take(json.loads(resp.body)["current"])
        return True

    async def submit(self) -> bool:
        if self.image_id is None:
            self.stats.exhausted += 1
            return False
        payload = {
            "client_id": str(uuid.uuid4()),
            "image": self.image_id,
            "tones": [self.rng.randint(1, 10)],
            "uncertain": False,
            "time_spent_ms": self.rng.randint(1500, 2500),
            "tone_order": list(range(1, 11)),
            "client_info": {"viewport": "1920x1080", "dpr": 1, "bench": True},
        }
        resp = await timed(
            self.conn,
            self.stats,
            "submit",
            "POST",
            f"/api/phases/{self.phase}/labels/",
            self.post_headers,
            json.dumps(payload).encode(),
        )
        if resp is None or resp.status not in (200, 201):
            # Resynchronise with the server's view of the queue.
            return await self.get_next(record=False)
        self._take(json.loads(resp.body)["next"])
        return True

    async def fetch_image(self) -> None:
        if self.display_url is None:
            return
        resp = await timed(self.conn, self.stats, "image", "GET", self.display_url, self.auth)
        if resp is not None and resp.status == 200:
            self.stats.image_bytes += len(resp.body)


_NULL = Stats(t_record=float("inf"), t_end=float("-inf"))


async def paced_loop(stats: Stats, t0: float, interval: float, work) -> None:
    """Open-loop pacing: cycle k starts at ``t0 + k * interval`` (at once if late)."""
    k = 0
    while True:
        t_sched = t0 + k * interval
        if t_sched >= stats.t_end:
            return
        now = time.perf_counter()
        if t_sched > now:
            await asyncio.sleep(t_sched - now)
        elif now - t_sched > 0.05 and t_sched >= stats.t_record:
            stats.late += 1
        if t_sched >= stats.t_record:
            stats.slots += 1
        if not await work(k):
            return
        k += 1


def proc_cpu_seconds(pids: list[int]) -> dict[int, float]:
    """CPU seconds (user + system) used so far by each of ``pids``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return out


def cpu_between(a: dict[int, float], b: dict[int, float]) -> float:
    """CPU used between two snapshots by the processes alive at the second (new ones: all of theirs)."""
    return sum(t - a.get(pid, 0.0) for pid, t in b.items())


def process_groups(gunicorn_pid: int | None) -> dict[str, list[int]]:
    """Pids of gunicorn (master and workers) and of PostgreSQL's processes."""
    groups: dict[str, list[int]] = {"gunicorn": [], "postgres": []}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        pid = int(name)
        if gunicorn_pid and (pid == gunicorn_pid or ppid == gunicorn_pid):
            groups["gunicorn"].append(pid)
        elif comm.startswith("postgres"):
            groups["postgres"].append(pid)
    return groups


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


class CpuMeter:
    def __init__(self, gunicorn_pid: int | None) -> None:
        self.gunicorn_pid = gunicorn_pid

    def snapshot(self) -> dict:
        groups = process_groups(self.gunicorn_pid)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        busy, total = machine_cpu()
        return {
            "t": time.perf_counter(),
            "self": usage.ru_utime + usage.ru_stime,
            "gunicorn": proc_cpu_seconds(groups["gunicorn"]),
            "postgres": proc_cpu_seconds(groups["postgres"]),
            "busy": busy,
            "total": total,
        }

    @staticmethod
    def delta(a: dict, b: dict) -> dict:
        wall = b["t"] - a["t"]
        ncpu = os.cpu_count() or 1
        return {
            "wall_s": wall,
            "loadgen_cores": (b["self"] - a["self"]) / wall,
            "gunicorn_cores": cpu_between(a["gunicorn"], b["gunicorn"]) / wall,
            "postgres_cores": cpu_between(a["postgres"], b["postgres"]) / wall,
            "machine_cores": ncpu * (b["busy"] - a["busy"]) / max(1, b["total"] - a["total"]),
            "ncpu": ncpu,
        }


async def run(spec: dict) -> dict:
    rng = random.Random(spec.get("seed", 0))
    warmup, duration = float(spec["warmup"]), float(spec["duration"])
    t_start = time.perf_counter()
    stats = Stats(t_record=t_start + warmup, t_end=t_start + warmup + duration)
    meter = CpuMeter(spec.get("gunicorn_pid"))
    labelers = [Labeler(spec, u, stats, random.Random(rng.random())) for u in spec["users"]]
    # Each labeler learns its current image (not recorded: a session start).
    await asyncio.gather(*(lab.get_next(record=False) for lab in labelers))
    t_start = time.perf_counter()
    stats.t_record, stats.t_end = t_start + warmup, t_start + warmup + duration
    mode = spec["mode"]
    interval = float(spec.get("interval", 2.0))
    next_every = int(spec.get("next_every", 0))
    tasks = []
    if mode == "paced":
        for lab in labelers:

            async def work(k: int, lab=lab) -> bool:
                if not await lab.submit():
                    return False
                if spec.get("fetch_image", True):
                    await lab.fetch_image()
                if next_every and k % next_every == next_every - 1:
                    await lab.get_next()
                return True

            tasks.append(paced_loop(stats, t_start + rng.uniform(0, interval), interval, work))
        health_headers = {"Accept": "application/json"}
        for _ in range(int(spec.get("healthz_users", len(labelers)))):
            conn = Conn(spec["host"], spec["port"])

            async def hz(k: int, conn=conn) -> bool:
                await timed(conn, stats, "healthz", "GET", "/healthz", health_headers)
                return True

            tasks.append(paced_loop(stats, t_start + rng.uniform(0, interval), interval, hz))
    elif mode == "saturate":
        for lab in labelers:

            async def sat(lab=lab) -> None:
                while time.perf_counter() < stats.t_end:
                    if not await lab.submit():
                        return

            tasks.append(sat())
    else:
        raise SystemExit(f"unknown mode {mode!r}")

    async def measure_cpu() -> dict:
        await asyncio.sleep(max(0.0, stats.t_record - time.perf_counter()))
        a = meter.snapshot()
        await asyncio.sleep(max(0.0, stats.t_end - time.perf_counter()))
        return CpuMeter.delta(a, meter.snapshot())

    cpu_task = asyncio.ensure_future(measure_cpu())
    await asyncio.gather(*tasks)
    cpu = await cpu_task
    for lab in labelers:
        lab.conn.close()
    return {
        "mode": mode,
        "duration": duration,
        "latencies": stats.latencies,
        "statuses": stats.statuses,
        "errors": stats.errors,
        "late": stats.late,
        "slots": stats.slots,
        "exhausted": stats.exhausted,
        "image_bytes": stats.image_bytes,
        "reconnects": sum(lab.conn.reconnects for lab in labelers),
        "cpu": cpu,
    }


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    if spec["host"] not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("the load generator only targets this machine (127.0.0.1)")
    result = asyncio.run(run(spec))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
