"""What the train commands refuse before any training: an option typed that the run would never read (a DP option
without --dp, a LoRA rank without --lora, a size or tokenizer setting with a checkpoint that brings its own), and DP
settings that contradict each other. Each is one InputError naming the options typed."""

from __future__ import annotations

import click
from click.core import ParameterSource

from lmaudit.errors import InputError
from lmaudit.models.recipe import DPSettings

# The parameters that only DP-SGD reads: without --dp, giving one is refused rather than ignored.
DP_ONLY = ("noise_multiplier", "target_epsilon", "max_grad_norm", "delta", "max_samples_per_group", "audit_dp",
           "gradient_canaries")


def typed(*names: str) -> list[str]:
    """The options among the parameters `names` given on the command line, as the help names them (a value alone cannot
    tell an option given from one left at its default)."""
    ctx = click.get_current_context()
    return [param.opts[0] for param in ctx.command.params
            if param.name in names and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE]


def listed(options: list[str]) -> str:
    """'--a', '--a and --b', '--a, --b and --c'."""
    return " and ".join(filter(None, (", ".join(options[:-1]), options[-1])))


def dp_settings(dp: bool, noise_multiplier: float | None, target_epsilon: float | None, max_grad_norm: float,
                delta: float, max_samples_per_group: int | None, audit_dp: bool,
                gradient_canaries: int) -> DPSettings | None:
    """The DP-SGD settings of --dp and its options; InputError for an option that could not take effect (a DP option
    without --dp, --gradient-canaries without --audit-dp), or --dp without exactly one of --noise-multiplier and
    --target-epsilon."""
    unaudited = bool(typed("gradient_canaries")) and not audit_dp  # gradient canaries are planted by --audit-dp alone
    if not dp:
        given = typed(*DP_ONLY)
        if given:
            one = len(given) == 1
            raise InputError(f"{listed(given)} appl{'ies' if one else 'y'} to DP training only: add "
                             f"{'--dp --audit-dp' if unaudited else '--dp'}, or drop {'it' if one else 'them'}")
        return None
    if noise_multiplier is None and target_epsilon is None:
        raise InputError("--dp needs one of --noise-multiplier (e.g. 1.0; larger is more private and less accurate) and "
                         "--target-epsilon (e.g. 4)")
    if noise_multiplier is not None and target_epsilon is not None:
        raise InputError("--dp needs one of --noise-multiplier and --target-epsilon, not both: each sets the noise "
                         "(--target-epsilon the noise that spends it); drop one")
    if unaudited:
        raise InputError("--gradient-canaries applies to --audit-dp only: add --audit-dp, or drop --gradient-canaries")
    return DPSettings(noise_multiplier, max_grad_norm, delta, max_samples_per_group,
                      gradient_canaries if audit_dp else 0, target_epsilon)


# Options that the way training starts never reads: (the option that makes them unread, its parameter, their parameters).
UNREAD_WITH = (("--init-from", "init_from", ("size", "tokenizer_dir", "architecture", "tokenization", "vocab_size")),
               ("--tokenizer", "tokenizer_dir", ("tokenization", "vocab_size")))


def refuse_unread(options: dict) -> None:
    """InputError for an option typed that the run would not read: a LoRA rank without --lora, or what a checkpoint
    (--init-from) or a tokenizer folder (--tokenizer) brings itself."""
    if not options.get("lora") and typed("lora_rank"):
        raise InputError("--lora-rank applies to --lora only: add --lora (with --init-from), or drop --lora-rank")
    for option, parameter, unread in UNREAD_WITH:
        given = typed(*unread) if options.get(parameter) else []
        if given:
            one = len(given) == 1
            raise InputError(f"{listed(given)} {'is' if one else 'are'} not read with {option}, which brings its own: "
                             f"drop {'it' if one else 'them'}, or drop {option}")
