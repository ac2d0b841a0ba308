"""benchmarks/gpu.py runs end to end on the CPU with tiny shapes (`--device cpu --tiny`), so that the GPU run, made
whenever a GPU is lent, does not fail on its first try: its table has every row, with positive numbers and fractions of
the peak in (0, 1]."""

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCORING_WAYS = ["lmaudit clm_loss, default batch_tokens", "lmaudit clm_loss, batch_tokens 32768",
                "lmaudit clm_tokens, default batch_tokens", "lmaudit clm_tokens, batch_tokens 32768",
                "plain padded batch of 32"]


def table_rows(output: str) -> list[dict[str, str]]:
    """The rows of the markdown table printed last, as dicts keyed by its header."""
    lines = [line for line in output.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


def test_the_gpu_benchmark_runs_tiny_on_the_cpu_with_every_row():
    # fp32: a CPU without bf16 instructions (AVX-512 BF16, AMX) emulates bf16 matmuls, its 1024 x 1024 bf16 peak fell
    # below the rate of the bf16 scoring itself (6x here), and a fraction of that peak is no fraction
    done = subprocess.run([sys.executable, "gpu.py", "--device", "cpu", "--tiny", "--dtype", "fp32"], cwd=BENCHMARKS,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = table_rows(done.stdout)
    by_measurement: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_measurement.setdefault(row["measurement"], []).append(row)

    (peak,) = by_measurement["matmul peak"]
    assert float(peak["rate"]) > 0 and peak["unit"] == "TFLOP/s"

    scoring, energy = by_measurement["causal scoring"], by_measurement["masked-LM energy, K=10"]
    assert [next(w for w in SCORING_WAYS if row["way"].startswith(w)) for row in scoring] == SCORING_WAYS
    assert [row["way"].split(" (")[0] for row in energy] == ["lmaudit mlm_energy, default batch_tokens",
                                                           "lmaudit mlm_energy, batch_tokens 32768"]
    for row in scoring + energy:
        assert float(row["seconds"]) > 0 and float(row["rate"]) > 0, row
        assert 0 < float(row["fraction of peak"]) <= 1, row

    training = {row["way"]: row for row in by_measurement["training"]}
    assert set(training) == {"plain transformers loop", "lmaudit train_language_model"}
    assert all(float(row["rate"]) > 0 and row["unit"] == "tokens/s" for row in training.values())
    assert float(training["lmaudit train_language_model"]["ratio"]) > 0  # lmaudit's tokens/s over the plain loop's
    (private,) = by_measurement["training, DP-SGD"]
    assert float(private["rate"]) > 0 and float(private["ratio"]) > 0  # non-DP tokens/s over DP's

    assert "torch" in done.stdout and "transformers" in done.stdout and "commit" in done.stdout
