"""The command line behaves like the tools users know: -h everywhere, every option explained with its default (taken
from the settings models), the same options spelled the same way on every command, one-line usage errors, options
wired into the configuration, logging of the stages (timestamped when stderr is not a terminal, -q, -v), and a
docs/cli.md generated from the code."""

from __future__ import annotations

import importlib.util
import logging
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from lmaudit.attacks.settings import AttackSettings
from lmaudit.cli import main
from lmaudit.cli import studies as study_commands
from lmaudit.config import AuditConfig, PlacementSettings, TokenPassSettings
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.recipe import SIZES, TrainingRecipe
from lmaudit.signals.settings import SignalSettings
from tests.helpers import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parents[2]
TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d lmaudit: ")


def all_commands(command: click.Command = main, path: tuple[str, ...] = ()):
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from all_commands(sub, (*path, name))


def option(path: tuple[str, ...], name: str) -> click.Option:
    command = dict(all_commands())[path]
    return next(p for p in command.params if isinstance(p, click.Option) and name in p.opts)


def help_of(*path: str) -> str:
    result = CliRunner().invoke(main, [*path, "-h"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def run(*args: str):
    """stdout, stderr and the exit status of `lmaudit ARGS` (stderr is not a terminal here)."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.stdout, result.stderr, result.exit_code


def test_h_and_help_print_the_same_help_for_every_command():
    """-h is --help on the group, the train group and every command."""
    for path, _ in all_commands():
        short, long = CliRunner().invoke(main, [*path, "-h"]), CliRunner().invoke(main, [*path, "--help"])
        assert short.exit_code == long.exit_code == 0, (path, short.output)
        assert short.output == long.output and short.output.startswith("Usage: "), path


def test_every_option_has_help_and_its_default_shown():
    """Each option of each command says what it does; one with a default value shows it, in click's [default: ...] or,
    where the default lives in the configuration (None), written into the help text."""
    assert main.context_settings["show_default"]  # inherited by every command's context
    for path, command in all_commands():
        ctx = click.Context(command, info_name="lmaudit", show_default=True)
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            assert param.help, f"lmaudit {' '.join(path)} {param.opts[0]}: no help"
            default = param.get_default(ctx)
            has_default = default not in (None, ()) and isinstance(default, str | int | float | tuple)
            if has_default and not param.is_flag:  # a flag is off unless given
                assert "default:" in param.get_help_record(ctx)[1], (path, param.opts)


def test_audit_help_states_the_configuration_defaults_from_the_settings_models():
    """audit's options default to None (so that a --config file's value stands); their help gives the real default,
    read from the pydantic models, so that it cannot drift from them."""
    expected = {
        "--k": SignalSettings().k, "--masks": SignalSettings().masks,
        "--batch-tokens": "sized for the device: 4,096 on a CPU, 32,768 on a GPU",
        "--signal": "the target's kind: mlm_energy for a masked LM, clm_tokens for a causal LM, classifier for a "
                    "classifier", "--precision": SignalSettings().precision,
        "--bootstrap": EvaluationSettings().bootstrap, "--length-slices": EvaluationSettings().length_slices,
        "--seed": SignalSettings().seed, "--min-k-fraction": f"{AttackSettings().min_k_fraction:g}",
        "--rmia-offline-a": f"{AttackSettings().rmia_offline_a:g}", "--recall-prefix": TokenPassSettings().recall_prefix,
        "--neighbours": TokenPassSettings().neighbours, "--device": PlacementSettings().device,
        "--dtype": PlacementSettings().dtype, "--backend": PlacementSettings().backend,
    }
    for name, default in expected.items():
        audit_option = option(("audit",), name)
        assert audit_option.default is None, name
        assert f"(default: {default})" in " ".join(audit_option.help.split()), (name, audit_option.help)
    assert PlacementSettings().device == "auto"


def test_score_and_audit_share_the_signal_and_placement_options_with_the_settings_defaults():
    """score and audit take the same signal and placement options; score's defaults are the settings' defaults, and
    --device defaults to auto (cuda when available)."""
    shared = {"--signal", "--k", "--masks", "--normalize", "--seed", "--max-length", "--precision", "--batch-tokens",
              "--device", "--dtype", "--device-map", "--quantization", "--backend", "--ray-address", "--ray-workers"}
    for command in ("score", "audit"):
        names = {opt for p in dict(all_commands())[(command,)].params for opt in p.opts}
        assert shared <= names, shared - names
    for name, field in (("--k", "k"), ("--masks", "masks"), ("--seed", "seed"), ("--precision", "precision"),
                        ("--batch-tokens", "batch_tokens"), ("--signal", "signal")):
        assert option(("score",), name).default == SignalSettings.model_fields[field].default, name
    assert option(("score",), "--device").default == "auto"
    assert {"--bootstrap", "--length-slices", "--length-bounds", "--slice-by", "--seed"} <= {
        opt for p in dict(all_commands())[("attack",)].params for opt in p.opts}
    assert option(("attack",), "--length-slices").default == EvaluationSettings().length_slices
    assert option(("attack",), "--bootstrap").default == EvaluationSettings().bootstrap


def test_sizes_batch_sizes_and_noises_are_the_code_defaults():
    """A model's size and a run's size have one name each (the three train commands' --model-size; demo's, study's and
    dp-sweep's --size) with one definition; the constants the CLI keeps to start without torch are the code's."""
    from lmaudit.studies.dp_sweep import DEFAULT_NOISES
    from lmaudit.studies.registry import STUDY_SIZES
    from lmaudit.studies.setup import CLASSIFIER_DEMO_SIZES, DEMO_SIZES

    assert study_commands.DEMO_SIZES == tuple(DEMO_SIZES) == tuple(CLASSIFIER_DEMO_SIZES)
    assert tuple(float(n) for n in study_commands.DEFAULT_NOISES.split(",")) == DEFAULT_NOISES
    train_sizes = [option(("train", kind), "--model-size") for kind in ("mlm", "clm", "classifier")]
    assert {(tuple(o.type.choices), o.default, o.help) for o in train_sizes} == {(tuple(SIZES), "tiny", train_sizes[0].help)}
    for kind in ("mlm", "clm", "classifier"):
        assert option(("train", kind), "--batch-size").default == TrainingRecipe().batch_size
        assert option(("train", kind), "--learning-rate")
    demo = option(("demo",), "--size")
    assert (tuple(demo.type.choices), demo.default) == (study_commands.DEMO_SIZES, "quick")
    # The studies and the dp sweep plan for every demo size but the demo's own quick one; smoke unless asked.
    assert set(STUDY_SIZES) == set(DEMO_SIZES) - {"quick"}
    for path in (("study",), ("dp-sweep",)):
        assert (tuple(option(path, "--size").type.choices), option(path, "--size").default) == (STUDY_SIZES, "smoke")


@pytest.mark.parametrize("args, command, fragment", [
    (["--bogus"], "lmaudit", "No such option '--bogus'"),
    (["scroe"], "lmaudit", "No such command 'scroe'"),
    (["score", "--target", "m", "--data", "d", "--out", "o.csv", "--bogus"], "lmaudit score", "No such option '--bogus'"),
    (["train", "mlm", "--data", "d", "--out", "o", "--model-size", "huge"], "lmaudit train mlm", "'huge' is not one of"),
    (["score", "--data", "d", "--out", "o.csv"], "lmaudit score", "Missing option '--target'"),
    (["train", "clm", "--data", "d", "--out", "o", "--epochs", "many"], "lmaudit train clm", "'many' is not a valid integer"),
    (["audit", "--length-bounds", "20,abc"], "lmaudit audit", "--length-bounds"),
    (["attack", "--scores", "s", "--out", "o", "--length-bounds", "60,20"], "lmaudit attack", "increasing"),
    (["-v", "-q", "synth", "--out", "x.csv"], "lmaudit", "--verbose and --quiet"),
])
def test_usage_errors_are_one_line_on_stderr_with_status_2(args, command, fragment):
    """A usage error prints one line, `lmaudit: error: MESSAGE (see 'lmaudit COMMAND -h')`, on stderr, exit status 2,
    and no Usage: block."""
    stdout, stderr, code = run(*args)
    assert code == 2 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("lmaudit: error: ") and lines[0].endswith(f"(see '{command} -h')"), lines[0]
    assert fragment in lines[0] and "Usage:" not in stderr


def test_an_option_out_of_range_is_named_as_typed(tmp_path):
    """`extract --suffix-tokens 0` names --suffix-tokens, never the configuration's extraction.suffix_tokens."""
    code, output = run_cli("extract", "--target", tmp_path, "--members", "m.csv", "--nonmembers", "n.csv",
                           "--out", tmp_path / "x", "--suffix-tokens", 0)
    assert_one_line_error(code, output, "--suffix-tokens")
    assert "extraction.suffix_tokens" not in output


def test_a_command_line_setting_refused_by_the_configuration_names_its_option():
    """Where the configuration refuses a value given on the command line, the error names the option typed."""
    from lmaudit.config import COMMAND_LINE, validated

    with pytest.raises(InputError, match=r"^command line: --suffix-tokens: "):
        validated({"target": "t", "members": "m", "nonmembers": "n", "out": "o", "extraction": {"suffix_tokens": 0}},
                  COMMAND_LINE)


@pytest.fixture
def captured_audit(monkeypatch):
    """audit with the pipeline replaced: the configuration it would run."""
    import lmaudit.audit.run
    import lmaudit.report.document
    import lmaudit.report.tables

    seen = {}
    monkeypatch.setattr(lmaudit.audit.run, "run_audit", lambda config, progress, overwrite, plan=None: seen.update(config=config) or {"warnings": []})
    monkeypatch.setattr(lmaudit.report.tables, "summary_table", lambda report: "")
    monkeypatch.setattr(lmaudit.report.document, "typed_report", lambda report: report)
    return seen


def test_audit_options_land_in_the_nested_configuration_sections(captured_audit, tmp_path):
    """--seed sets signal.seed and evaluation.seed; signal and evaluation options fill their sections; --device is
    auto unless given."""
    stdout, stderr, code = run("audit", "--target", "t", "--members", "m.csv", "--nonmembers", "n.csv", "--out", tmp_path,
                               "--seed", 7, "--k", 3, "--masks", "all", "--normalize", "mean", "--max-length", 64,
                               "--batch-tokens", 512, "--precision", "bf16", "--bootstrap", 50, "--length-slices", 0,
                               "--length-bounds", "20,60", "--slice-by", "source", "--slice-by", "ward",
                               "--min-k-fraction", 0.1)
    assert code == 0, stderr
    config = captured_audit["config"]
    assert (config.signal.seed, config.evaluation.seed) == (7, 7)
    assert (config.signal.k, config.signal.masks, config.signal.normalize, config.signal.max_length) == (3, "all", "mean", 64)
    assert (config.signal.batch_tokens, config.signal.precision) == (512, "bf16")
    assert (config.evaluation.bootstrap, config.evaluation.length_slices) == (50, 0)
    assert config.evaluation.length_bounds == (20, 60) and config.evaluation.slice_by == ("source", "ward")
    assert config.attacks.min_k_fraction == 0.1 and config.placement.device == "auto"


def test_reference_kl_is_off_unless_asked_on_the_command_line_or_in_the_file(captured_audit, tmp_path):
    """--reference-kl (or reference_kl: true in a --config YAML) turns on the KL pass for informia_tokens."""
    arguments = ("audit", "--target", "t", "--members", "m.csv", "--nonmembers", "n.csv", "--out", tmp_path)
    for extra, expected in (((), False), (("--reference-kl",), True)):
        _, stderr, code = run(*arguments, *extra)
        assert code == 0, stderr
        assert captured_audit["config"].token_passes.reference_kl is expected
    (tmp_path / "audit.yaml").write_text("target: t\nmembers: m.csv\nnonmembers: n.csv\nout: o\nreference_kl: true\n")
    _, stderr, code = run("audit", "--config", tmp_path / "audit.yaml")
    assert code == 0, stderr
    assert captured_audit["config"].token_passes.reference_kl is True

def test_audit_options_override_the_config_files_values_and_leave_the_rest(captured_audit, tmp_path):
    """Given options override a --config YAML's values; options not given leave the file's values (device, k)."""
    (tmp_path / "audit.yaml").write_text("target: t\nmembers: m.csv\nnonmembers: n.csv\nout: o\ndevice: cpu\n"
                                         "lowercase: false\nwhitebox: true\n"
                                         "signal: {k: 2, seed: 1}\nevaluation: {bootstrap: 50, slice_by: [source]}\n")
    _, stderr, code = run("audit", "--config", tmp_path / "audit.yaml", "--bootstrap", 100, "--seed", 3,
                          "--length-slices", 5)
    assert code == 0, stderr
    config = captured_audit["config"]
    assert (config.evaluation.bootstrap, config.evaluation.length_slices, config.evaluation.slice_by) == (100, 5, ("source",))
    assert (config.signal.k, config.signal.seed, config.evaluation.seed, config.placement.device) == (2, 3, 3, "cpu")
    assert config.token_passes.lowercase is False and config.whitebox is True


def test_attack_builds_the_evaluation_settings_from_its_options(monkeypatch, tmp_path):
    """attack passes --bootstrap, --seed, --length-slices, --length-bounds and --slice-by to run_attack."""
    import lmaudit.audit.run
    import lmaudit.report.document
    import lmaudit.report.tables

    seen = []
    monkeypatch.setattr(lmaudit.audit.run, "run_attack", lambda scores, out, settings, overwrite: seen.append(settings) or {"warnings": []})
    monkeypatch.setattr(lmaudit.report.tables, "summary_table", lambda report: "")
    monkeypatch.setattr(lmaudit.report.document, "typed_report", lambda report: report)
    _, stderr, code = run("attack", "--scores", "s.csv", "--out", tmp_path, "--bootstrap", 20, "--seed", 5,
                          "--length-slices", 2, "--length-bounds", "10, 30", "--slice-by", "source")
    assert code == 0, stderr
    assert run("attack", "--scores", "s.csv", "--out", tmp_path)[2] == 0
    assert seen == [EvaluationSettings(bootstrap=20, seed=5, length_slices=2, length_bounds=(10, 30), slice_by=("source",)),
                    EvaluationSettings()]


def test_train_commands_pass_the_batch_size(monkeypatch, tmp_path, notes):
    """--batch-size reaches train_language_model (mlm, clm) and train_classifier, the default when not given."""
    import lmaudit.models.classifier
    import lmaudit.models.train

    class Summary:
        n_samples, final_train_loss, dp, epochs_run, best_epoch = 4, 1.0, None, 1, 1
        train_accuracy = validation_accuracy = 1.0
        test_accuracy, gap_measured_on, generalization_gap = None, "validation", 0.0

    calls = []
    monkeypatch.setattr(lmaudit.models.train, "train_language_model", lambda kind, texts, out, recipe, *a: calls.append(recipe) or Summary())
    monkeypatch.setattr(lmaudit.models.classifier, "train_classifier", lambda data, out, recipe, *a: calls.append(recipe) or Summary())
    data = tmp_path / "data.csv"
    notes.head(4).assign(label=["a", "b", "a", "b"]).to_csv(data, index=False)
    for kind in ("mlm", "clm"):
        assert run("train", kind, "--data", data, "--out", tmp_path / kind, "--batch-size", 8)[2] == 0
    assert run("train", "classifier", "--data", data, "--validation", data, "--out", tmp_path / "c", "--batch-size", 8)[2] == 0
    assert run("train", "mlm", "--data", data, "--out", tmp_path / "m")[2] == 0
    assert [recipe.batch_size for recipe in calls] == [8, 8, 8, TrainingRecipe().batch_size]


def test_stages_are_logged_timestamped_quiet_silences_verbose_adds_chunks(tiny_model_dirs, notes, tmp_path):
    """With stderr not a terminal, a score run logs its pass start and end as timestamped lines (samples, reused,
    computed, seconds); a rerun says all were reused; -q logs nothing; -v adds a debug line per chunk. No sample text
    ever reaches the log, and the handler is gone after the run."""
    data = tmp_path / "data.csv"
    notes.head(5).to_csv(data, index=False)
    args = ["score", "--target", tiny_model_dirs[0], "--data", data, "--k", 2, "--chunk-size", 2]
    stdout, stderr, code = run(*args, "--out", tmp_path / "a.csv")
    assert code == 0 and "wrote mlm_energy of 5 samples" in stdout and stdout.count("\n") == 1
    lines = stderr.strip().splitlines()
    assert lines and all(TIMESTAMPED.match(line) for line in lines), stderr
    assert "scoring model: 5 samples, 0 reused from the signal store, 5 to compute in 3 chunks" in lines[0]
    assert re.search(r"scored model: 5 samples \(0 reused, 5 computed\) in [\d.]+ s$", lines[-1]), lines[-1]
    assert "debug:" not in stderr
    _, rerun, _ = run(*args, "--out", tmp_path / "b.csv")
    assert "model: 5 samples, all reused from the signal store" in rerun
    assert run("-q", *args, "--k", 3, "--out", tmp_path / "c.csv")[1] == ""
    _, verbose, code = run("-v", *args, "--k", 4, "--out", tmp_path / "d.csv")
    assert code == 0 and "debug: scoring model: chunk 1/3 stored, 2/5 samples computed" in verbose
    assert all(TIMESTAMPED.match(line) for line in verbose.strip().splitlines())
    for text in notes["text"].head(5):
        assert text not in stderr + verbose
    assert not logging.getLogger("lmaudit").handlers


def test_training_logs_start_epochs_and_end(notes, tmp_path):
    """train logs its start (samples, epochs, batch size), each epoch's loss (INFO without a terminal) and its end."""
    data = tmp_path / "notes.csv"
    notes.head(12).to_csv(data, index=False)
    _, stderr, code = run("train", "mlm", "--data", data, "--out", tmp_path / "model", "--epochs", 2, "--batch-size", 4)
    assert code == 0, stderr
    assert "lmaudit: training model (mlm, tiny): 12 samples, 2 epochs, batch size 4" in stderr
    assert re.search(r"lmaudit: training model: epoch 2/2, loss \d+\.\d{3}", stderr)
    assert "lmaudit: trained model: final loss" in stderr
    assert all(TIMESTAMPED.match(line) for line in stderr.strip().splitlines())


def test_throttle_lets_a_line_through_at_most_once_per_interval():
    """Chunk progress lines in logs come at most once per interval (ten seconds by default)."""
    from lmaudit.logs import PROGRESS_INTERVAL_S, Throttle

    assert PROGRESS_INTERVAL_S == 10
    slow = Throttle(3600)
    assert [slow() for _ in range(5)] == [False] * 5
    assert Throttle(0)()


def test_docs_cli_md_is_generated_from_the_commands():
    """docs/cli.md is what scripts/cli_docs.py writes from the commands' help: rerun it after changing an option."""
    spec = importlib.util.spec_from_file_location("cli_docs", ROOT / "scripts" / "cli_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rendered = module.render()
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == rendered, \
        "docs/cli.md is out of date: run .venv/bin/python scripts/cli_docs.py"
    for path, _ in all_commands():
        assert f"## `{' '.join(('lmaudit', *path))}`" in rendered


def test_nonmembers_options_become_one_file_or_named_sets(tmp_path):
    from lmaudit.cli.audit_options import nonmember_files

    assert nonmember_files(()) is None
    assert nonmember_files(("a/notes.csv",)) == "a/notes.csv"
    assert nonmember_files(("mimic=a.csv",)) == {"mimic": "a.csv"}
    assert nonmember_files(("mimic=a.csv", "b/i2b2.csv")) == {"mimic": "a.csv", "i2b2": "b/i2b2.csv"}
    odd = tmp_path / "x=y.csv"  # an existing file whose name holds '=' is a file, not a NAME=FILE
    odd.write_text("text\nx\n")
    assert nonmember_files((str(odd),)) == str(odd)
    config = AuditConfig(target="t", members="m.csv", nonmembers={"b": "b.csv", "a": "a.csv"}, out="o")
    assert [(f.role, f.path, f.nonmember_set) for f in config.role_files()] == [
        ("member", "m.csv", None), ("nonmember", "b.csv", "b"), ("nonmember", "a.csv", "a")]


def test_a_reports_warnings_go_to_stderr_with_the_logs_and_quiet_silences_them_not_report_json(tmp_path):
    """An audit without population data: the verdict itself carries the caveat of what it cannot claim (on stdout and
    in report.json's summary); the warnings go to stderr as `lmaudit: warning:` lines, never to stdout; -q silences
    them, and report.json keeps them all."""
    import json

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    scores = tmp_path / "scores.csv"
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(40)], "role": ["member", "nonmember"] * 20,
                  "target_loss": rng.normal(size=40)}).to_csv(scores, index=False)
    stdout, stderr, code = run("attack", "--scores", scores, "--out", tmp_path / "a", "--bootstrap", 20)
    assert code == 0, stderr
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["warnings"] and "warning:" not in stdout.lower(), stdout
    assert all(f"lmaudit: warning: {warning}" in stderr for warning in report["warnings"])
    [caveat] = report["summary"]["caveats"]
    assert caveat.startswith("no population data") and f"Caveat: {caveat}" in stdout
    quiet_out, quiet_err, code = run("-q", "attack", "--scores", scores, "--out", tmp_path / "b", "--bootstrap", 20)
    assert code == 0 and quiet_err == "" and "Caveat: no population data" in quiet_out
    assert json.loads((tmp_path / "b" / "report.json").read_text())["warnings"] == report["warnings"]
