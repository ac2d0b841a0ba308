"""Signal computation on a Ray cluster: a scoring job's chunks run on Ray actors, each holding one replica of the models.

The driver (the process that runs `lmaudit`) keeps the signal store: actors return each chunk's values to it and it
writes them, so only the driver needs the store's disk. Every node needs lmaudit, the same Python and Ray versions as
the driver, and the model folders at the same paths; nothing is downloaded (the models load offline, and Ray's usage
report is off unless RAY_USAGE_STATS_ENABLED says otherwise). `ray` is imported only when a chunk is to be scored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from types import ModuleType

import pandas as pd

from lmaudit.errors import InputError

Job = Callable[[list[str], list[str]], list[pd.DataFrame]]
Chunk = tuple[list[str], list[str]]
CPUS_PER_WORKER = 1  # one torch thread per actor: N actors on N cores do not oversubscribe them


class Replica:
    """The body of one Ray actor: one job at a time, received once (its models load on its first chunk), run on each
    chunk it is given."""

    def __init__(self, threads: int):
        import torch

        torch.set_num_threads(threads)  # Ray sets OMP_NUM_THREADS from num_cpus; torch's own pool is sized here
        self.job: Job | None = None

    def take(self, job: Job) -> None:
        """Score with this job from now on; the previous job's models are freed."""
        self.job = job

    def score(self, ids: list[str], texts: list[str]) -> list[pd.DataFrame]:
        """The job's frames for one chunk: one per store."""
        return self.job(ids, texts)


class RayBackend:
    """Runs chunks on `workers` Ray actors of the cluster at `address` (None: RAY_ADDRESS, else a new local cluster on
    this machine; 'auto': the cluster this machine belongs to). Each actor takes 1 CPU and `gpus_per_worker` GPUs.
    Default workers: as many as the cluster's GPUs hold when gpus_per_worker > 0, else one per CPU (each actor holds
    its own copy of the models in memory: cap it with `workers` for large models on CPUs). Only the nodes up when a
    job starts count: an autoscaling cluster's nodes must be started first."""

    def __init__(self, address: str | None = None, workers: int | None = None, gpus_per_worker: float = 0):
        self.address = address
        self.workers = workers
        self.gpus_per_worker = gpus_per_worker
        self.chunks_per_worker: list[int] = []  # chunks each worker scored in the last map_chunks call (for logs, tests)
        self._replicas: list = []  # Ray actor handles; Ray ends the actors when the handles are dropped

    def map_chunks(self, job: Job, chunks: list[Chunk]) -> Iterator[tuple[int, list[pd.DataFrame]]]:
        """(chunk position, frames) for every chunk, in the order they finish. The workers stay up for the next job
        (starting one costs seconds of imports) until `close`, or at once on an error or an interrupt."""
        if not chunks:
            return  # everything is stored already: no cluster to start
        ray = _ray()
        _connect(ray, self.address)
        replicas = self._started(ray, min(self.worker_count(ray.cluster_resources()), len(chunks)))
        job_ref = ray.put(job)  # shipped to the object store once, not once per worker
        for replica in self._replicas:  # idle ones too, so that none keeps a previous job's models in memory
            replica.take.remote(job_ref)  # an actor runs one caller's calls in order: this comes before any chunk
        self.chunks_per_worker = [0] * len(replicas)
        try:
            yield from self._dispatch(ray, replicas, chunks)
        except BaseException:  # a failed, interrupted or abandoned run: its workers may still be scoring
            self.close()
            raise

    def close(self) -> None:
        """End the workers now, freeing their models' memory and their share of the cluster (they end anyway when
        this backend is dropped); a later job starts new ones."""
        for replica in self._replicas:
            _ray().kill(replica)
        self._replicas = []

    def worker_count(self, resources: dict[str, float]) -> int:
        """How many actors to start on a cluster with these resources (`ray.cluster_resources()`); InputError when
        the asked-for number does not fit, since an actor that cannot be placed would wait forever."""
        cpus, gpus = int(resources.get("CPU", 0)), resources.get("GPU", 0)
        room = cpus // CPUS_PER_WORKER
        if self.gpus_per_worker > 0:
            room = min(room, int(gpus // self.gpus_per_worker))
        if room < 1:
            raise InputError(f"the Ray cluster ({cpus} CPUs, {gpus:g} GPUs) has no room for one worker of "
                             f"{CPUS_PER_WORKER} CPU and {self.gpus_per_worker:g} GPU")
        if self.workers is not None and self.workers > room:
            raise InputError(f"--ray-workers {self.workers}: the Ray cluster ({cpus} CPUs, {gpus:g} GPUs) has room for "
                             f"{room} workers of {CPUS_PER_WORKER} CPU and {self.gpus_per_worker:g} GPU")
        return self.workers or room

    def _started(self, ray: ModuleType, count: int) -> list:
        """The first `count` workers, starting those not yet running."""
        actor = ray.remote(Replica).options(num_cpus=CPUS_PER_WORKER, num_gpus=self.gpus_per_worker)
        self._replicas += [actor.remote(CPUS_PER_WORKER) for _ in range(count - len(self._replicas))]
        return self._replicas[:count]

    def _dispatch(self, ray: ModuleType, replicas: list, chunks: list[Chunk]) -> Iterator[tuple[int, list[pd.DataFrame]]]:
        """Give each idle actor the next chunk; yield each result as it arrives."""
        waiting = iter(enumerate(chunks))
        running: dict = {}  # object ref -> (worker, chunk position)

        def give(worker: int) -> None:
            item = next(waiting, None)
            if item is not None:
                position, (ids, texts) = item
                running[replicas[worker].score.remote(ids, texts)] = (worker, position)

        for worker in range(len(replicas)):
            give(worker)
        while running:
            (done,), _ = ray.wait(list(running), num_returns=1)
            worker, position = running.pop(done)
            give(worker)  # before the driver stores this chunk, so the actor is not idle meanwhile
            frames = _result(ray, done, worker, position)
            self.chunks_per_worker[worker] += 1
            yield position, frames


def _ray() -> ModuleType:
    """The ray module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("--backend ray needs Ray: pip install 'lmaudit[ray]'") from None
    return ray


def _connect(ray: ModuleType, address: str | None) -> None:
    """Join the cluster once per process (a cluster already joined, by a notebook or a test, is kept)."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # an audit sends nothing off the machine
    ray.init(address=address, include_dashboard=False, logging_level="warning")


def _result(ray: ModuleType, done, worker: int, position: int) -> list[pd.DataFrame]:
    """A finished chunk's frames; bad input is raised as it would be in process, a failed actor as a RuntimeError."""
    try:
        return ray.get(done)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, InputError):
            raise err.cause from None
        raise RuntimeError(f"Ray worker {worker} failed on chunk {position}: {err.cause!r}; finished chunks are stored "
                           "and a rerun resumes from them") from err
    except ray.exceptions.RayActorError as err:
        raise RuntimeError(f"Ray worker {worker} died while scoring chunk {position} (out of memory, or its node was "
                           f"lost?): {err}; finished chunks are stored and a rerun resumes from them") from err
