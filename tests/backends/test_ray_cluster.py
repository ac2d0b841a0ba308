"""--backend ray: a local Ray cluster of 2 CPU workers scores exactly what a run in process scores, writes the same
store (reused by a run in process, which then computes nothing), and gives the command line the same file."""

import sys

import numpy as np
import pandas as pd
import pytest
import torch

from lmaudit.audit.records import resolve
from lmaudit.backends.choose import signal_backend
from lmaudit.backends.ray_cluster import RayBackend
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.signals.compute import Scoring, model_signal, model_signals
from lmaudit.signals.settings import SignalSettings
from tests.helpers import invoke

SETTINGS = SignalSettings(k=2)
CHUNK = 8  # small chunks, so that both workers get several


@pytest.fixture(scope="module")
def ray_cluster():
    """A local cluster of 2 CPUs (2 workers of 1 CPU each) for the whole module, nothing sent off the machine."""
    import ray

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        patch.setenv("RAY_AUTH_MODE", "disabled")  # a throwaway cluster on this machine: no token written to ~/.ray
        ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
        yield
        ray.shutdown()


@pytest.fixture(scope="module")
def backend(ray_cluster):
    """One backend for the module's API tests: its 2 workers start once (seconds of imports each) and serve every job."""
    return RayBackend()


@pytest.fixture
def one_thread():
    """Torch on 1 thread in this process, as in each Ray worker: float sums are bit-identical only at equal thread
    counts, so the in-process runs compared with Ray use the same."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def samples(notes):
    """Sample ids and texts: 48 notes, 6 chunks of 8."""
    head = notes.head(48)
    return head["sample_id"].tolist(), head["text"].tolist()


def parts_in(cache) -> list:
    return sorted(cache.rglob("part-*.parquet"))


def assert_identical(left: pd.DataFrame, right: pd.DataFrame) -> None:
    assert left["sample_id"].tolist() == right["sample_id"].tolist()
    for column in ("value", "n_tokens", "truncated"):
        assert np.array_equal(left[column].to_numpy(), right[column].to_numpy()), column


def test_ray_workers_score_what_a_run_in_process_scores_into_a_reusable_store(backend, one_thread, tiny_model_dirs, samples,
                                                                               tmp_path):
    """Both workers score chunks; values, token counts and truncation equal the in-process run's bit for bit; and the
    store the Ray run wrote serves a later run in process without computing anything."""
    ids, texts = samples
    on_ray = model_signal(tiny_model_dirs[0], ids, texts, SETTINGS, Scoring(tmp_path / "ray", chunk_size=CHUNK, backend=backend))
    assert len(backend.chunks_per_worker) == 2 and min(backend.chunks_per_worker) > 0
    assert sum(backend.chunks_per_worker) == len(ids) // CHUNK
    in_process = model_signal(tiny_model_dirs[0], ids, texts, SETTINGS, Scoring(tmp_path / "local", chunk_size=CHUNK))
    assert_identical(on_ray, in_process)
    stored = parts_in(tmp_path / "ray")
    assert len(stored) == len(ids) // CHUNK
    reused = model_signal(tiny_model_dirs[0], ids, texts, SETTINGS, Scoring(tmp_path / "ray", chunk_size=CHUNK))
    assert parts_in(tmp_path / "ray") == stored  # nothing was computed again
    assert_identical(reused, in_process)


def test_joint_scoring_of_target_and_reference_on_ray_equals_in_process(backend, one_thread, tiny_model_dirs, samples,
                                                                         tmp_path):
    """Target and reference scored on the same batches (the joint path) by a Ray worker equal the in-process joint run,
    and their stores serve a later run in process without computing anything."""
    ids, texts = samples
    models = dict(zip(("target", "reference"), tiny_model_dirs, strict=True))
    on_ray = model_signals(models, ids, texts, SETTINGS, Scoring(tmp_path / "ray", backend=backend))
    in_process = model_signals(models, ids, texts, SETTINGS, Scoring(tmp_path / "local"))
    for name in models:
        assert_identical(on_ray[name], in_process[name])
    stored = parts_in(tmp_path / "ray")
    assert len(stored) == 2  # one chunk per model's store
    reused = model_signals(models, ids, texts, SETTINGS, Scoring(tmp_path / "ray"))
    assert parts_in(tmp_path / "ray") == stored
    for name in models:
        assert_identical(reused[name], in_process[name])


def test_bad_input_on_a_worker_raises_the_input_error_of_a_run_in_process(backend, tiny_model_dirs, tmp_path):
    """A sample the tokenizer makes nothing of, found on a worker, is refused with the InputError a run in process
    raises (which the command line prints as one line), not a Ray error."""
    with pytest.raises(InputError, match="sample 'empty'"):
        model_signal(tiny_model_dirs[0], ["empty"], [" "], SETTINGS, Scoring(tmp_path, backend=backend))


def test_score_command_with_backend_ray_writes_the_same_file(backend, one_thread, tiny_model_dirs, notes, tmp_path):
    """`lmaudit score --backend ray` (joining the running cluster) writes the file `lmaudit score` writes (one worker:
    that two share the chunks is the first test's)."""
    backend.close()  # the cluster's CPUs go to the command's own worker
    data = tmp_path / "notes.csv"
    notes.head(24).to_csv(data, index=False)
    common = ("score", "--target", tiny_model_dirs[0], "--data", data, "--k", 2, "--chunk-size", CHUNK)
    invoke(*common, "--out", tmp_path / "ray" / "energy.csv", "--backend", "ray", "--ray-workers", 1)
    invoke(*common, "--out", tmp_path / "local" / "energy.csv")
    assert (tmp_path / "ray" / "energy.csv").read_bytes() == (tmp_path / "local" / "energy.csv").read_bytes()


def test_more_workers_than_the_cluster_holds_is_refused_not_left_waiting():
    """Workers that cannot be placed would wait forever: asking for them is an InputError naming the room there is."""
    assert RayBackend().worker_count({"CPU": 4.0}) == 4
    assert RayBackend(gpus_per_worker=1).worker_count({"CPU": 16.0, "GPU": 2.0}) == 2
    with pytest.raises(InputError, match="--ray-workers 3: .* room for 2 workers"):
        RayBackend(workers=3).worker_count({"CPU": 2.0})
    with pytest.raises(InputError, match="no room for one worker"):
        RayBackend(gpus_per_worker=1).worker_count({"CPU": 8.0})


def test_the_configuration_picks_the_backend(tmp_path, tiny_model_dirs):
    """backend local computes in process; ray gives a RayBackend with the address and workers asked for, and one GPU
    per worker when the models run on cuda; Ray options without backend ray are refused, not ignored."""
    audit = {"target": str(tiny_model_dirs[0]), "members": "m.csv", "nonmembers": "n.csv", "out": str(tmp_path)}
    assert resolve(AuditConfig(**audit)).scoring.backend is None
    backend = resolve(AuditConfig(**audit, backend="ray", ray_address="auto", ray_workers=3)).scoring.backend
    assert (backend.address, backend.workers, backend.gpus_per_worker) == ("auto", 3, 0)
    assert signal_backend("ray", None, None, "cuda").gpus_per_worker == 1
    with pytest.raises(InputError, match="apply to --backend ray"):
        resolve(AuditConfig(**audit, ray_workers=3))


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    """No Ray: one InputError with the pip command, raised when there is something to score."""
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert list(RayBackend().map_chunks(None, [])) == []  # nothing missing: Ray is not needed
    with pytest.raises(InputError, match=r"pip install 'lmaudit\[ray\]'"):
        list(RayBackend().map_chunks(None, [(["a"], ["text"])]))

