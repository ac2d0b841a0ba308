"""Where and how weights load: the dtype is the weights' own (and a different model to the store), an accelerate
device map scores as the plain model does, and quantization without its requirements is a one-line error."""

import numpy as np
import pandas as pd
import pytest
import torch

from lmaudit.models.fingerprints import model_fingerprint, weights_fingerprint
from lmaudit.models.load import load_model
from lmaudit.models.source import Placement
from lmaudit.signals.compute import Scoring, model_signal
from lmaudit.signals.settings import SignalSettings
from tests.families import save_family_model
from tests.helpers import assert_one_line_error, invoke, run_cli


@pytest.fixture(scope="module")
def qwen(tiny_tokenizer, tmp_path_factory):
    return save_family_model("qwen2", "clm", tiny_tokenizer, tmp_path_factory.mktemp("qwen") / "model")


def test_weights_load_in_the_dtype_asked_and_are_stored_apart(qwen, notes, tmp_path):
    for dtype, torch_dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        loaded = load_model(qwen, "clm", Placement(dtype=dtype))
        assert {p.dtype for p in loaded.model.parameters()} == {torch_dtype}
    fingerprints = {weights_fingerprint(qwen, Placement(dtype=d)) for d in ("fp32", "bf16", "fp16")}
    assert len(fingerprints) == 3 and weights_fingerprint(qwen, Placement()) == model_fingerprint(qwen)
    ids, texts = notes["sample_id"].tolist()[:8], notes["text"].tolist()[:8]
    settings = SignalSettings(signal="clm_loss", max_length=64)
    full = model_signal(qwen, ids, texts, settings, Scoring(tmp_path))["value"].to_numpy(dtype=float)
    half = model_signal(qwen, ids, texts, settings, Scoring(tmp_path, placement=Placement(dtype="bf16")))["value"].to_numpy(dtype=float)
    assert not np.array_equal(full, half)  # computed anew, not read from the fp32 store
    np.testing.assert_allclose(half, full, rtol=2e-2)  # bf16 keeps 8 bits of mantissa; log-softmax stays fp32


def test_device_map_auto_scores_as_the_model_placed_whole(qwen, notes, tmp_path):
    loaded = load_model(qwen, "clm", Placement(device_map="auto"))  # no GPU here: accelerate places it all on the CPU
    assert {p.device.type for p in loaded.model.parameters()} == {"cpu"}
    data = tmp_path / "data.csv"
    notes.head(6).to_csv(data, index=False)
    for name, extra in (("whole", []), ("mapped", ["--device-map", "auto"])):
        invoke("score", "--target", qwen, "--data", data, "--signal", "clm_loss", "--out", tmp_path / f"{name}.csv",
               "--cache-dir", tmp_path / name, *extra)
    whole, mapped = (pd.read_csv(tmp_path / f"{name}.csv")["clm_loss"] for name in ("whole", "mapped"))
    np.testing.assert_allclose(mapped, whole, rtol=1e-6)


def test_quantization_needs_bitsandbytes_and_a_gpu(qwen, notes, tmp_path):
    data = tmp_path / "data.csv"
    notes.head(2).to_csv(data, index=False)
    code, output = run_cli("score", "--target", qwen, "--data", data, "--signal", "clm_loss", "--quantization", "4bit",
                           "--out", tmp_path / "q.csv")
    assert_one_line_error(code, output, "--quantization 4bit")
    assert not (tmp_path / "q.csv").exists()


def test_trust_remote_code_warns_once_per_folder_and_the_fingerprint_covers_the_code(tiny_model_dirs, tmp_path, caplog):
    """Code a folder ships runs only with trust_remote_code, which says so in a warning naming the files; and because
    that code computes the numbers, changing it changes the model's fingerprint (a stored signal is not reused)."""
    import shutil

    folder = tmp_path / "with-code"
    shutil.copytree(tiny_model_dirs[0], folder)
    before = model_fingerprint(folder)
    (folder / "modeling_custom.py").write_text("SCALE = 1\n")
    with_code = model_fingerprint(folder)
    (folder / "modeling_custom.py").write_text("SCALE = 2.0\n")  # another size: fingerprints are remembered by size and time
    assert len({before, with_code, model_fingerprint(folder)}) == 3

    with caplog.at_level("WARNING", logger="lmaudit"):
        load_model(folder, "mlm")
        assert not caplog.records
        for _ in range(2):
            load_model(folder, "mlm", Placement(trust_remote_code=True))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "trust_remote_code is on" in warnings[0] and "modeling_custom.py" in warnings[0]
