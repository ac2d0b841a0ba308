"""Device-correct code without a GPU: the tensor helpers that run beside a model are run on PyTorch's `meta` device,
where a tensor made on the CPU next to one on the model's device fails exactly as it would on CUDA (meta tensors have
no data, so only what does not read values can run there); training records where it ran and in which precision, and
a device or precision it cannot use is a one-line refusal."""

import json

import pytest
import torch

from lmaudit.models.inputs import per_sample_position_inputs
from lmaudit.signals.whitebox import attention_concentration, concentration_summary
from tests.helpers import assert_one_line_error, run_cli

META = torch.device("meta")


def test_a_cpu_tensor_beside_a_meta_one_fails_as_beside_a_cuda_one():
    """The strategy's premise: the white-box crash on CUDA (quantile's q made on the CPU) fails on meta too."""
    with pytest.raises(RuntimeError, match="same device"):
        torch.quantile(torch.ones(2, 5, device=META), torch.tensor([0.5]), dim=-1)


def test_the_white_box_summaries_stay_on_the_attentions_device():
    attention = torch.softmax(torch.empty(2, 3, 6, 6, device=META), dim=-1)
    summary = concentration_summary(attention_concentration(attention))
    assert summary.device == META and summary.shape == (2, 3, 4)  # mean, median, p05, p95 over 6 rows


def test_per_sample_position_inputs_stay_on_the_batchs_device(tiny_bert):
    ids = torch.zeros(2, 7, dtype=torch.long, device=META)
    assert {value.device for value in per_sample_position_inputs(tiny_bert, ids).values()} == {META}


def test_training_records_its_device_and_precision_and_bf16_autocast_trains(notes, tmp_path):
    """`--device auto` trains on the CPU here and says so; bf16 autocasts the forward passes only: the saved weights
    stay fp32, and the loss is close to fp32's."""
    from safetensors.torch import load_file

    from lmaudit.models.recipe import TrainingRecipe
    from lmaudit.models.train import train_language_model

    texts = notes["text"].tolist()[:24]
    losses = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / precision
        summary = train_language_model("clm", texts, out, TrainingRecipe(epochs=1, batch_size=8, precision=precision))
        recorded = json.loads((out / "lmaudit_training.json").read_text())
        assert (summary.device, recorded["device"], recorded["precision"]) == ("cpu", "cpu", precision)
        assert {tensor.dtype for tensor in load_file(out / "model.safetensors").values()} == {torch.float32}
        losses[precision] = summary.final_train_loss
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.05)


def test_a_device_or_precision_training_cannot_use_is_refused_in_one_line(notes, tmp_path):
    from lmaudit.errors import InputError
    from lmaudit.models.recipe import TrainingRecipe
    from lmaudit.models.setup import set_up_training

    with pytest.raises(InputError, match="--dtype fp16: training runs in fp32 or bf16"):
        set_up_training("clm", ["a b c"], TrainingRecipe(precision="fp16"))
    data = tmp_path / "train.csv"
    notes.head(10).to_csv(data, index=False)
    if not torch.cuda.is_available():
        code, output = run_cli("train", "clm", "--data", data, "--out", tmp_path / "m", "--device", "cuda")
        assert_one_line_error(code, output, "--device cuda: no CUDA GPU is visible", "--device cpu or auto")
        assert not (tmp_path / "m").exists()


def test_a_gpu_out_of_memory_in_training_is_a_one_line_error_saying_what_to_change(notes, tmp_path, monkeypatch):
    import lmaudit.models.train as train

    def out_of_memory(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(train, "set_up_training", out_of_memory)
    data = tmp_path / "train.csv"
    notes.head(10).to_csv(data, index=False)
    code, output = run_cli("train", "clm", "--data", data, "--out", tmp_path / "m")
    assert_one_line_error(code, output, "training ran out of GPU memory", "--batch-size", "--dtype bf16", "--device cpu")
    assert not (tmp_path / "m").exists()
