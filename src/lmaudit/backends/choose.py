"""Which backend computes an audit's signals: this process, or the workers of a Ray cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmaudit.errors import InputError

if TYPE_CHECKING:
    from lmaudit.backends.ray_cluster import RayBackend


def signal_backend(backend: str, address: str | None, workers: int | None, device: str) -> RayBackend | None:
    """None for backend local (in this process); for ray, a RayBackend whose workers take one GPU each when the
    models run on cuda."""
    if backend == "local":
        if address is not None or workers is not None:
            raise InputError("--ray-address and --ray-workers apply to --backend ray")
        return None
    from lmaudit.backends.ray_cluster import RayBackend

    return RayBackend(address, workers, gpus_per_worker=1 if device == "cuda" else 0)
