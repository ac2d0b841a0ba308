"""`lmaudit score`, `lmaudit audit` and `lmaudit attack`: a model's signal for a corpus, an audit from models, and an
audit from precomputed losses."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.cli.app import log_warnings, overwrite_option, progress
from lmaudit.cli.audit_options import (
    UNLESS_CONFIG,
    audit_config,
    audit_setting,
    audit_settings_options,
    nonmember_files,
    token_setting,
)
from lmaudit.cli.help import GroupedCommand
from lmaudit.cli.options import (
    BACKEND_NAMES,
    COLUMN_NAMES,
    EVALUATION_NAMES,
    PLACEMENT_NAMES,
    SERVING_NAMES,
    SIGNAL_NAMES,
    backend_options,
    column_names,
    column_options,
    evaluation_options,
    placement_options,
    serving_options,
    setting,
    signal_options,
)
from lmaudit.config import given
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.signals.registry import signal_names
from lmaudit.signals.settings import SignalSettings


@click.command(cls=GroupedCommand, groups={
    "Model": "--target --adapter", "Data": f"--data {COLUMN_NAMES}", "Output": "--out --cache-dir --shard --chunk-size",
    "Signal": SIGNAL_NAMES, "Placement": PLACEMENT_NAMES, "Backend": BACKEND_NAMES,
}, renamed={"--model": "--target"}, epilog="lmaudit score --target model --data members.csv --out member-signals.parquet")
@click.option("--target", required=True, type=click.Path(), help="Model folder (save_pretrained or `lmaudit train`).")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter folder to apply to --target.")
@click.option("--data", required=True, type=click.Path(), help="Corpus file with a 'text' column (.csv, .jsonl, .parquet).")
@column_options(from_config=False)
@signal_options(from_config=False)
@placement_options(from_config=False)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.csv, .jsonl or .parquet).")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: FOLDER.signals/ beside the folder of --out, so "
                   "that every output file of that folder shares it).")
@click.option("--shard", default=None, help="Score only part i of N (e.g. 0/4); N processes sharing --cache-dir split the "
                                            "work (default: all).")
@click.option("--chunk-size", default=512, type=click.IntRange(min=1), help="Samples per stored chunk.")
@backend_options(from_config=False, what="chunks are")
def score(target: str, adapter: str | None, data: str, out: str, cache_dir: str | None, shard: str | None,
          chunk_size: int, **options) -> None:
    """Compute a per-sample LM signal (nats; lower = more likely under the model), reading --data in chunks."""
    from lmaudit.backends.choose import signal_backend
    from lmaudit.models.load import resolve_device
    from lmaudit.models.source import ModelSource, Placement
    from lmaudit.signals.compute import Scoring, score_file
    from lmaudit.signals.store import default_cache_dir, parse_shard

    settings = SignalSettings(**{key: options.pop(key) for key in list(options) if key in SignalSettings.model_fields})
    placement = Placement(device=resolve_device(options["device"]), dtype=options["dtype"],
                          device_map=options["device_map"], quantization=options["quantization"])
    backend = signal_backend(options["backend"], options["ray_address"], options["ray_workers"], placement.device)
    scoring = Scoring(cache_dir=Path(cache_dir) if cache_dir else default_cache_dir(Path(out).parent),
                      placement=placement, backend=backend, progress=progress(), chunk_size=chunk_size)
    written, truncated = score_file(ModelSource(target, adapter), data, out, settings, scoring,
                                    parse_shard(shard) if shard is not None else None, column_names(options))
    click.echo(f"wrote {settings.signal} of {written} samples to {out} ({truncated} truncated)")


@click.command(cls=GroupedCommand, groups={
    "Configuration": "--config --plan",
    "Models": "--target --adapter --reference --reference-adapter --shadow --allow-tokenizer-mismatch",
    "Data": f"--members --nonmembers --population --calibration-members --shadow-members --shadow-nonmembers --data "
            f"{COLUMN_NAMES}",
    "Output": "--out --cache-dir --overwrite --figures --include-text --release --field",
    "Signal": f"{SIGNAL_NAMES} --token-signal",
    "Evaluation": EVALUATION_NAMES,
    "Attacks' settings": "--whitebox --whitebox-split --min-k-fraction --rmia-offline-a --lowercase --recall-prefix "
                         "--neighbours --neighbour-words --neighbour-model --self-prompt-reference --camia --samia --reference-kl "
                         "--frequency-data --extraction",
    "Placement": PLACEMENT_NAMES, "Backend": BACKEND_NAMES, "Served model (docs/serving.md)": SERVING_NAMES,
}, epilog="lmaudit audit --target model --out report \\\n"
          "    --members members.csv --nonmembers nonmembers.csv\n"
          "lmaudit audit --target model --reference base-model --out report \\\n"
          "    --members members.csv --nonmembers nonmembers.csv \\\n"
          "    --population population.csv")
@click.option("--config", "config_path", default=None, type=click.Path(),
              help="audit.yaml with the same settings; options given here override its values.")
@click.option("--plan", "plan_path", default=None, type=click.Path(),
              help="Run exactly this plan (`lmaudit plan`): its models, data and every setting that measures; refused "
                   "unless they are unchanged, and with any option but how the audit runs (--out, --cache-dir, "
                   "--device, --device-map, --backend, --ray-address, --ray-workers, --figures, --include-text, "
                   "--release, --overwrite).")
@audit_settings_options
@click.option("--out", default=None, type=click.Path(file_okay=False), help=f"Folder of the report.{UNLESS_CONFIG}")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: OUT.signals/ beside --out, never in it).")
@click.option("--overwrite", is_flag=True,
              help="Replace the report of an audit configured otherwise in --out (without it such a folder is refused; "
                   "a rerun of the same audit reuses its signals).")
def audit(config_path: str | None, plan_path: str | None, nonmembers: tuple[str, ...], extraction_asked: bool,
          overwrite: bool, **options) -> None:
    """Audit a model: signals of target (and references or shadow), every attack the data allows, the report."""
    from lmaudit.audit.run import run_audit
    from lmaudit.report.document import typed_report
    from lmaudit.report.tables import summary_table

    options["nonmembers"] = nonmember_files(nonmembers)
    planned = None
    if plan_path:
        from lmaudit.report.plan import planned_config

        if extraction_asked:
            raise InputError(f"--extraction: fixed by the plan ({plan_path}); drop it, or write a new plan with it")
        config, planned = planned_config(plan_path, options, config_path)
    else:
        config = audit_config(config_path, options, extraction_asked, "out")
    report = run_audit(config, progress=progress(), overwrite=overwrite, plan=planned)
    click.echo(summary_table(typed_report(report)))
    log_warnings(report["warnings"])
    click.echo(f"report: {Path(config.out) / 'report.html'}")


@click.command(cls=GroupedCommand, groups={
    "Data": "--scores", "Output": "--out --overwrite", "Evaluation": f"{EVALUATION_NAMES} --seed",
}, epilog="lmaudit attack --scores scores.csv --out report")
@click.option("--scores", required=True, type=click.Path(),
              help="sample_id, role, target_loss[, reference_loss or reference_loss_1, _2, ..., group_id, length]")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of the report.")
@evaluation_options(from_config=False)
@setting(EvaluationSettings, "seed", help="Seed of the bootstrap, the permutation tests and the balanced repeats.")
@click.option("--overwrite", is_flag=True, help="Replace the report of another audit in --out (without it such a folder "
                                                "is refused).")
def attack(scores: str, out: str, overwrite: bool, **options) -> None:
    """Audit from precomputed losses (lower = more likely under the model): same attacks and report."""
    from lmaudit.audit.run import run_attack
    from lmaudit.report.document import typed_report
    from lmaudit.report.tables import summary_table

    report = run_attack(scores, out, EvaluationSettings(**given(options)), overwrite=overwrite)
    click.echo(summary_table(typed_report(report)))
    log_warnings(report["warnings"])
    click.echo(f"report: {Path(out) / 'report.html'}")



@click.command("dataset-inference", cls=GroupedCommand, groups={
    "Models": "--target --adapter --reference", "Data": f"--suspect --validation --population {COLUMN_NAMES}",
    "Output": "--out --cache-dir --overwrite --include-text", "Signal": f"{SIGNAL_NAMES} --token-signal",
    "Placement": PLACEMENT_NAMES, "Served model (docs/serving.md)": SERVING_NAMES,
}, epilog="lmaudit dataset-inference --target model --out dataset-inference \\\n"
          "    --suspect suspect.csv --validation validation.csv")
@click.option("--target", required=True, type=click.Path(), help="The model's folder.")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target (the base).")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model, never trained on the suspect or validation texts; repeat for several.")
@click.option("--suspect", "members", required=True, type=click.Path(),
              help="The texts suspected of having been trained on (.csv, .jsonl, .parquet; a 'text' column, "
                   "optionally 'group_id').")
@click.option("--validation", "nonmembers", required=True, type=click.Path(),
              help="Texts drawn like the suspect ones and known unseen by the model.")
@click.option("--population", default=None, type=click.Path(),
              help="More unseen texts, for the attacks that calibrate on them (RMIA, DC-PDD); optional.")
@column_options(from_config=True)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of dataset_inference.json.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: OUT.signals/ beside --out, never in it).")
@signal_options(from_config=True)
@placement_options(from_config=True)
@token_setting("token_signal", type=click.Choice(signal_names("tokens")), default_text="none",
               help="Also compute this per-token signal for the token-level attacks (e.g. mlm_tokens).")
@audit_setting("include_text", is_flag=True, default_text="off",
               help="List the blind baseline's words that say 'member' in dataset_inference.json (training text!).")
@serving_options(from_config=True)
@overwrite_option
def dataset_inference(overwrite: bool, **options) -> None:
    """Was this dataset used to train the model? Maini et al.'s test of a suspect set against a validation set."""
    from lmaudit.audit.dataset_inference import RESULT_FILE, infer_dataset
    from lmaudit.config import load_config

    if Path(options["members"]).resolve() == Path(options["nonmembers"]).resolve():
        raise InputError(f"{options['members']}: given as both --suspect and --validation; the validation texts must be "
                         "others, drawn alike and known unseen by the model")
    document = infer_dataset(load_config(None, options), progress(), overwrite)
    log_warnings(document["warnings"])
    click.echo(document["statement"])
    click.echo(f"result: {Path(options['out']) / RESULT_FILE}")


COMMANDS = (score, audit, attack, dataset_inference)
