"""The signal store: an interrupted run resumes, recomputes nothing finished, and gives identical numbers."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.signals.compute import Scoring, model_signal
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.store import SignalStore, stored_signals


def stored_signal(store, ids, texts, compute, chunk_size=512):
    """One store's values, computed by a one-frame `compute`."""
    return stored_signals([store], ids, texts, lambda i, t: [compute(i, t)], chunk_size)[0]


def fake_compute(calls):
    def compute(ids, texts):
        calls.append(list(ids))
        return pd.DataFrame({"value": [float(len(t)) for t in texts], "n_tokens": [len(t) for t in texts], "truncated": False})
    return compute


def test_interrupted_run_resumes_without_recomputing(tmp_path):
    ids = [f"s{i}" for i in range(10)]
    texts = [f"text number {i}" * (i + 1) for i in range(10)]
    store = SignalStore(tmp_path, "f" * 64, SignalSettings())
    calls = []

    def crash_on_second_chunk(chunk_ids, chunk_texts):
        if calls:
            raise KeyboardInterrupt
        return fake_compute(calls)(chunk_ids, chunk_texts)

    with pytest.raises(KeyboardInterrupt):
        stored_signal(store, ids, texts, crash_on_second_chunk, chunk_size=4)
    assert calls == [ids[:4]]
    calls.clear()
    resumed = stored_signal(store, ids, texts, fake_compute(calls), chunk_size=4)
    assert calls == [ids[4:8], ids[8:]]
    uninterrupted = stored_signal(SignalStore(tmp_path / "fresh", "f" * 64, SignalSettings()), ids, texts, fake_compute([]), chunk_size=4)
    pd.testing.assert_frame_equal(resumed, uninterrupted)


def test_changed_text_under_the_same_id_is_recomputed(tmp_path):
    store = SignalStore(tmp_path, "f" * 64, SignalSettings())
    calls = []
    stored_signal(store, ["a", "b"], ["one", "two"], fake_compute(calls))
    calls.clear()
    values = stored_signal(store, ["a", "b"], ["one", "two, edited"], fake_compute(calls))
    assert calls == [["b"]]
    assert values["value"].tolist() == [3.0, 11.0]  # len("two, edited")


def test_settings_and_models_have_separate_stores(tmp_path):
    base = SignalStore(tmp_path, "a" * 64, SignalSettings(k=10)).folder
    assert SignalStore(tmp_path, "a" * 64, SignalSettings(k=5)).folder != base
    assert SignalStore(tmp_path, "b" * 64, SignalSettings(k=10)).folder != base


def test_model_signal_reuses_the_store_and_matches_direct_scoring(tiny_model_dirs, notes, tmp_path):
    ids, texts = notes["sample_id"].tolist()[:6], notes["text"].tolist()[:6]
    settings = SignalSettings(k=3)
    first = model_signal(tiny_model_dirs[0], ids, texts, settings, Scoring(tmp_path))
    parts = sorted(tmp_path.rglob("part-*.parquet"))
    second = model_signal(tiny_model_dirs[0], ids, texts, settings, Scoring(tmp_path))
    assert sorted(tmp_path.rglob("part-*.parquet")) == parts
    pd.testing.assert_frame_equal(first, second)
    from lmaudit.models.load import load_masked_lm
    from lmaudit.signals.mlm import mlm_signal

    loaded = load_masked_lm(tiny_model_dirs[0])
    direct, _ = mlm_signal(loaded.model, loaded.tokenizer, texts, ids, settings)
    np.testing.assert_allclose(first["value"].to_numpy(), direct, rtol=1e-6)
    # The store keeps ids and text hashes, never the text.
    stored = pd.concat(pd.read_parquet(p) for p in parts)
    assert "text" not in stored.columns and not stored.isin(texts).any().any()


def test_hub_id_resolves_from_the_local_cache_only(tiny_model_dirs, notes, tmp_path, monkeypatch):
    """A hub id is read from the local Hugging Face cache, never downloaded; an unknown id is a clear error."""
    import shutil

    import huggingface_hub.constants

    from lmaudit.errors import InputError
    from lmaudit.models.folders import resolve_model_folder

    snapshot = tmp_path / "hub" / "models--clinic--tiny-bert" / "snapshots" / "0123abcd"
    shutil.copytree(tiny_model_dirs[0], snapshot)
    (tmp_path / "hub" / "models--clinic--tiny-bert" / "refs").mkdir()
    (tmp_path / "hub" / "models--clinic--tiny-bert" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve_model_folder("clinic/tiny-bert") == snapshot
    ids, texts = notes["sample_id"].tolist()[:3], notes["text"].tolist()[:3]
    from_hub = model_signal("clinic/tiny-bert", ids, texts, SignalSettings(k=2), Scoring(tmp_path / "cache"))
    from_folder = model_signal(tiny_model_dirs[0], ids, texts, SignalSettings(k=2), Scoring(tmp_path / "cache"))
    pd.testing.assert_frame_equal(from_hub, from_folder)
    with pytest.raises(InputError, match="local Hugging Face cache"):
        resolve_model_folder("clinic/not-there")


def test_target_and_reference_on_the_same_batches_equal_separate_scoring(tiny_model_dirs, notes, tmp_path):
    from lmaudit.signals.compute import model_signals

    ids, texts = notes["sample_id"].tolist()[:8], notes["text"].tolist()[:8]
    settings = SignalSettings(k=3)
    joint = model_signals({"target": tiny_model_dirs[0], "reference": tiny_model_dirs[1]}, ids, texts, settings, Scoring(tmp_path / "joint"))
    for name, folder in zip(("target", "reference"), tiny_model_dirs, strict=True):
        alone = model_signal(folder, ids, texts, settings, Scoring(tmp_path / f"alone-{name}"))
        pd.testing.assert_frame_equal(joint[name], alone, check_exact=True)
    # A reference already stored is not scored again when audited with another target.
    parts = {p for p in (tmp_path / "joint").rglob("part-*.parquet")}
    reference_parts = {p for p in parts if p.parent.parent.name.startswith(model_fingerprint_prefix(tiny_model_dirs[1]))}
    model_signals({"target": tiny_model_dirs[1], "reference": tiny_model_dirs[1]}, ids, texts, settings, Scoring(tmp_path / "joint"))
    assert reference_parts and {p for p in (tmp_path / "joint").rglob("part-*.parquet")} == parts


def model_fingerprint_prefix(folder):
    from lmaudit.models.fingerprints import model_fingerprint

    return model_fingerprint(folder)[:16]


def test_fingerprints_are_remembered_across_runs_until_a_file_changes(tmp_path, monkeypatch):
    """A second process reads the fingerprint from the disk cache (no hashing of the weights); any change of a file's
    size or modification time makes it hash again."""
    import hashlib
    import os

    from lmaudit.models import fingerprints

    monkeypatch.setenv("LMAUDIT_CACHE_HOME", str(tmp_path / "home"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    expected = hashlib.sha256(b"config.json{}model.safetensorsweights").hexdigest()
    assert fingerprints.model_fingerprint(folder) == expected
    fingerprints._files_digest.cache_clear()  # as a new process would start
    remembered = next((tmp_path / "home" / "fingerprints").iterdir())
    remembered.write_text("f" * 64)  # stands for a value computed in an earlier run
    assert fingerprints.model_fingerprint(folder) == "f" * 64
    (folder / "model.safetensors").write_bytes(b"retrained")
    os.utime(folder / "model.safetensors", ns=(1, 1))
    fingerprints._files_digest.cache_clear()
    assert fingerprints.model_fingerprint(folder) == hashlib.sha256(b"config.json{}model.safetensorsretrained").hexdigest()


def test_the_store_is_no_membership_oracle(tmp_path):
    """Nothing written under the store's root is a plain hash of a text: with the files alone (without the secret in
    store.key) nobody can hash a guessed sentence and find it; two stores key the same text differently."""
    import hashlib
    import hmac

    ids = [f"s{i}" for i in range(6)]
    texts = [f"patient {i} was seen in clinic" for i in range(6)]
    first, second = SignalStore(tmp_path / "a", "f" * 64, SignalSettings()), SignalStore(tmp_path / "b", "f" * 64, SignalSettings())
    for store in (first, second):
        stored_signal(store, ids, texts, fake_compute([]))
    plain = {hashlib.sha256(text.encode()).hexdigest() for text in texts}
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    assert not any(digest.encode() in written for digest in plain)
    assert not any(text.encode() in written for text in texts)
    for part in tmp_path.rglob("*.parquet"):  # and no cell of any stored table, whatever the file's compression
        cells = set(pd.read_parquet(part).astype(str).to_numpy().ravel())
        assert cells.isdisjoint(plain) and cells.isdisjoint(texts)
    keys = [set(store.load()["text_key"]) for store in (first, second)]
    assert keys[0].isdisjoint(keys[1]) and len(keys[0]) == 6
    secret = bytes.fromhex((tmp_path / "a" / "store.key").read_text())
    assert keys[0] == {hmac.new(secret, text.encode(), hashlib.sha256).hexdigest() for text in texts}
    # A second store object on the same root shares its secret, so a rerun reuses every value.
    calls = []
    stored_signal(SignalStore(tmp_path / "a", "f" * 64, SignalSettings()), ids, texts, fake_compute(calls))
    assert calls == []


def test_a_new_store_sits_beside_the_output_readable_by_its_owner_only_and_says_what_it_holds(tmp_path):
    """The default store is `<out>.signals` beside the output folder, never in it (the folder a user shares); a new
    store is mode 700 with a README saying it holds the texts as token ids; a folder the user chose keeps its mode."""
    import stat

    from lmaudit.signals.store import README_FILE, default_cache_dir, store_secret

    out = tmp_path / "runs" / "audit"
    assert default_cache_dir(out) == tmp_path / "runs" / "audit.signals"
    store_secret(default_cache_dir(out))
    assert stat.S_IMODE(default_cache_dir(out).stat().st_mode) == 0o700
    assert "token ids" in (default_cache_dir(out) / README_FILE).read_text()
    chosen = tmp_path / "shared-store"
    chosen.mkdir(mode=0o755)
    store_secret(chosen)
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o755 and not (chosen / README_FILE).exists()
