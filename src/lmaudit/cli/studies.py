"""`lmaudit demo`, `lmaudit study` and `lmaudit dp-sweep`: whole audits on generated data with models trained on the
spot, one, a grid of them, or one per DP-SGD noise level."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import click

from lmaudit.cli.app import log_warnings, progress
from lmaudit.cli.renamed import RenamingCommand
from lmaudit.errors import InputError
from lmaudit.models.recipe import ARCHITECTURES
from lmaudit.studies.registry import STUDIES, STUDY_SIZES

# The demos' sizes (studies/setup.py DEMO_SIZES and CLASSIFIER_DEMO_SIZES; not imported here, which would import
# pandas) and the dp sweep's noise multipliers (studies/dp_sweep.py DEFAULT_NOISES, as text); a test checks that these
# agree.
DEMO_SIZES = ("smoke", "quick", "full")
DEFAULT_NOISES = "2,1,0.1,0.01,0.001,0"
SIZE_HELP = {"smoke": "smoke: about a minute, checks the set-up", "quick": "quick: a few minutes, the findings",
             "full": "full: the size the numbers of docs/results.md and docs/studies.md come from"}


def size_option(sizes: tuple[str, ...], default: str):
    """The size of the generated data and the models, shared by `demo` (DEMO_SIZES) and the studies and `dp-sweep`
    (studies/registry.py STUDY_SIZES)."""
    return click.option("--size", default=default, type=click.Choice(sizes),
                        help="The run's size (data, models, audit): " + "; ".join(SIZE_HELP[size] for size in sizes) + ".")


overwrite_option = click.option(
    "--overwrite", is_flag=True, help="Write into an --out that holds something else than this command's earlier run "
    "(a model, another command's result, other files); without it such a folder is refused. A rerun into its own "
    "folder resumes without it.")


@click.command()
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Output folder (default: runs/demo, "
                                                                            "runs/demo-<suite> for the other suites).")
@size_option(DEMO_SIZES, "quick")
@click.option("--seed", default=0, help="Seed of the generated data, the models and the audit.")
@click.option("--suite", default="mlm", type=click.Choice(["mlm", "causal", "classifier", "finetune"]),
              help="mlm: BERT models, MLM energy, likelihood ratio; causal: GPT-2 models, next-token loss; "
                   "classifier: topic classifiers of user posts, shadow-calibrated sample- and user-level attacks; "
                   "finetune: a GPT-2 base fine-tuned on the members in full and with LoRA, audited against the base.")
@click.option("--architecture", default="bert", type=click.Choice(ARCHITECTURES),
              help="Classifier architecture (--suite classifier).")
@overwrite_option
def demo(out: str | None, size: str, seed: int, suite: str, architecture: str, overwrite: bool) -> None:
    """Run the whole audit on generated data (clinical notes, or user posts) with tiny models trained on the spot."""
    from lmaudit.report.document import typed_report
    from lmaudit.report.tables import summary_table
    from lmaudit.studies.demo import default_out, run_demo
    from lmaudit.studies.folders import refuse_foreign_folder

    out = out or default_out(suite)
    refuse_foreign_folder(out, "demo", ("report.json", "finetune.json") if suite == "finetune" else ("report.json",),
                          overwrite)
    if suite == "finetune":
        from lmaudit.studies.finetune_suite import run_finetune_demo

        report = run_finetune_demo(out, size, seed, progress=progress())
    else:
        report = run_demo(out, size, seed, progress=progress(), suite=suite, architecture=architecture)
    click.echo(summary_table(typed_report(report)))
    log_warnings(report["warnings"])
    click.echo(f"report: {Path(out) / 'report.html'}")
    if suite != "finetune" and find_spec("typst") is not None:  # the optional PDF engine, which `make demo` installs
        from lmaudit.report.pdf import write_pdf

        click.echo(f"pdf: {write_pdf(out)}")


@click.command(epilog="Studies: " + "; ".join(f"{spec.name}: {spec.summary}" for spec in STUDIES) + ".")
@click.argument("name", required=False, type=click.Choice([spec.name for spec in STUDIES]), metavar="NAME")
@click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False),
              help="A study YAML file (a grid of training and audit settings, with its own size and seed; see "
                   "docs/studies.md) instead of NAME.")
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Output folder (default: runs/study-NAME).")
@size_option(STUDY_SIZES, "smoke")
@click.option("--seed", default=0, help="Seed of the generated data, the models and the audits.")
@click.option("--cells", "cell_patterns", multiple=True, metavar="PATTERN",
              help="Run only the cells whose names match this shell pattern (repeatable), e.g. 'classifier-*'; "
                   "study.json and study.html then tabulate those.")
@click.option("--cell-figures", is_flag=True,
              help="Draw each cell's ROC curves and histograms on its own page too (a third of a small cell's time); "
                   "the study's page has its figures either way.")
@overwrite_option
def study(name: str | None, config_file: str | None, out: str | None, size: str, seed: int,
          cell_patterns: tuple[str, ...], cell_figures: bool, overwrite: bool) -> None:
    """Run a study: train and audit a grid of settings, then tabulate and plot it (study.json, study.html); NAME is one
    of the studies below. A rerun keeps every finished cell."""
    from lmaudit.report.study import study_lines
    from lmaudit.studies.folders import refuse_foreign_folder
    from lmaudit.studies.registry import run_config_study, run_named_study

    if (name is None) == (config_file is None):
        raise InputError("give a study NAME or --config FILE (one of them); see 'lmaudit study -h'")
    if config_file is not None:
        from lmaudit.studies.grid import load_grid_config

        out = out or f"runs/study-{load_grid_config(config_file).study}"
        refuse_foreign_folder(out, "study", ("study.json",), overwrite)
        document = run_config_study(config_file, out, progress(), cell_patterns, cell_figures)
    else:
        out = out or f"runs/study-{name}"
        refuse_foreign_folder(out, "study", ("study.json",), overwrite)
        document = run_named_study(name, out, size, seed, progress(), cell_patterns, cell_figures)
    click.echo("\n".join(study_lines(document)))
    click.echo(f"report: {Path(out) / 'study.html'}")


@click.command("dp-sweep", cls=RenamingCommand, renamed={"--noise": "--noise-multipliers"})
@click.option("--out", default="runs/dp-sweep", type=click.Path(file_okay=False), help="Output folder.")
@click.option("--noise-multipliers", "noise", default=DEFAULT_NOISES,
              help="DP-SGD noise multipliers, comma-separated; 0 = clipping without noise.")
# smoke by default: at the default size (100 epochs per DP-SGD target) a sweep takes over an hour on 2 CPU cores.
@size_option(STUDY_SIZES, "smoke")
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Training epochs of the targets (default: the size's).")
@click.option("--seed", default=0, help="Seed of the generated data, the models and the audits.")
@click.option("--max-grad-norm", default=1.0, type=click.FloatRange(min=0, min_open=True), help="Per-sample clipping norm.")
@click.option("--delta", default=1e-5, type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              help="Delta of the epsilons (the accountants' and the empirical lower bounds).")
@click.option("--max-samples-per-group", default=50, type=click.IntRange(min=1), help="Notes kept per patient.")
@click.option("--whitebox", is_flag=True, help="Also run the white-box attacks at every noise level.")
@overwrite_option
def dp_sweep(out: str, noise: str, size: str, epochs: int | None, seed: int, max_grad_norm: float, delta: float,
             max_samples_per_group: int, whitebox: bool, overwrite: bool) -> None:
    """Train one DP-SGD masked LM per noise level on the demo's patients, audit each, compare epsilon and leakage."""
    from lmaudit.report.sweep import sweep_table
    from lmaudit.studies.dp_sweep import run_dp_sweep
    from lmaudit.studies.folders import refuse_foreign_folder

    try:
        noises = tuple(float(part) for part in noise.split(","))
    except ValueError:
        raise InputError(f"--noise-multipliers {noise}: expected comma-separated numbers, e.g. 2,1,0.1,0") from None
    if any(n < 0 for n in noises):
        raise InputError("--noise-multipliers: noise multipliers must be >= 0")
    refuse_foreign_folder(out, "dp-sweep", ("sweep.json",), overwrite)
    sweep = run_dp_sweep(out, noises, size, seed, max_grad_norm, delta, max_samples_per_group, whitebox, progress(), epochs)
    click.echo(sweep_table(sweep))
    click.echo(f"report: {Path(out) / 'sweep.html'}")


COMMANDS = (demo, study, dp_sweep)
