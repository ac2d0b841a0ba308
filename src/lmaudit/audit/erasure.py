"""`lmaudit erasure`: does the model still hold the subjects (patients, users) whose data was erased?

The erased subjects' texts (forget) and never-trained texts of the same kind (holdout), with an optional sample of
the subjects kept (retain), are scored by the model before erasure, after it, and, when given, a model retrained
without them, each through the audit's own signals and attacks (`audit/run.py:signals_and_attacks`, one store). One
declared attack scores membership (the loss, or the likelihood ratio against the references); `metrics/erasure.py`
tests and estimates, `report/erasure_words.py` words the verdict. Writes erasure.json (no text) into the output folder.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.attacks.base import AttackScores
from lmaudit.audit.corpus import checked_audit_corpus
from lmaudit.audit.erasure_extraction import erasure_extraction
from lmaudit.audit.erasure_settings import ErasureSettings
from lmaudit.audit.records import resolve
from lmaudit.audit.relearning import relearned_folder, relearned_model, relearned_rows
from lmaudit.audit.run import model_files, signals_and_attacks
from lmaudit.config import AuditConfig
from lmaudit.data.corpus import combine_corpora, generated_id_prefixes, load_corpus
from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET
from lmaudit.errors import InputError, row_location
from lmaudit.locks import output_lock
from lmaudit.metrics.erasure import (
    auc_change,
    equivalence,
    erasure_findings,
    mean_change,
    privleak_interval,
    separation,
)
from lmaudit.metrics.erasure_extraction import ErasureExtraction
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.source import ModelSource
from lmaudit.report.build import environment_info
from lmaudit.report.derived import stale_files
from lmaudit.report.document import typed_document
from lmaudit.report.documents import headed, refuse_another_run, write_document
from lmaudit.report.erasure_words import erasure_page, erasure_statements, estimate_sentences, extraction_sentences
from lmaudit.report.html import render_template
from lmaudit.report.integrity import data_hashes
from lmaudit.strict_json import json_ready

RESULT_FILE = "erasure.json"
PAGE_FILE = "erasure.html"
SETS = ("forget", "holdout", "retain")  # the option and the set name of each file, in the corpus's NONMEMBER_SET


def erasure_corpus(erasure: ErasureSettings, config: AuditConfig) -> pd.DataFrame:
    """The forget (as members), holdout and retain (as non-member sets) texts, checked: the forget texts all with a
    subject id, no set empty, no subject in two sets (InputError naming both rows)."""
    files = {name: path for name, path in zip(SETS, (erasure.forget, erasure.holdout, erasure.retain), strict=True)
             if path is not None}
    prefixes = generated_id_prefixes(files.values())
    parts = {}
    for name, path in files.items():
        part = load_corpus(path, MEMBER if name == "forget" else NONMEMBER, id_prefix=prefixes[str(path)],
                           names=config.columns)
        if part.empty:
            raise InputError(f"{path}: --{name} holds no texts; give the {name} subjects' texts")
        part[NONMEMBER_SET] = None if name == "forget" else name
        parts[name] = part
    check_never_trained(parts["holdout"], Path(erasure.holdout))
    unnamed = parts["forget"][parts["forget"]["group_id"].isna()]
    if len(unnamed):
        raise InputError(f"{row_location(unnamed.iloc[0])}: a forget text without a group_id; every erased text needs "
                         "its subject's id (the patient or user the request is about)")
    first_rows: dict[str, pd.Series] = {}  # each subject's first row, in the set it was first seen in
    for name, part in parts.items():
        for _, row in part.dropna(subset=["group_id"]).drop_duplicates("group_id").iterrows():
            first = first_rows.get(str(row["group_id"]))
            if first is None:
                first_rows[str(row["group_id"])] = row
            else:
                raise InputError(f"subject '{row['group_id']}' is in --{set_of(first)} ({row_location(first)}) and "
                                 f"--{name} ({row_location(row)}); each subject belongs to one set: the holdout "
                                 "subjects were never trained on, the retained ones never erased")
    return checked_audit_corpus(combine_corpora(list(parts.values())))


def check_never_trained(holdout: pd.DataFrame, path: Path) -> None:
    """Refuse holdout texts of a subject that `lmaudit split`'s records (split.json beside the file) put in training:
    a holdout subject must never have been trained on."""
    from lmaudit.data.plan import MANIFEST, PLAN_FILES

    train = path.parent / PLAN_FILES[MEMBER]
    if not (path.parent / MANIFEST).is_file() or not train.is_file():
        return
    trained = set(pd.read_parquet(train, columns=["group_id"])["group_id"].dropna().astype(str))
    crossing = holdout[holdout["group_id"].astype(str).isin(trained)]
    if len(crossing):
        raise InputError(f"{row_location(crossing.iloc[0])}: subject '{crossing['group_id'].iloc[0]}' of --holdout is "
                         f"in {train}, which {MANIFEST} says was trained on; give holdout subjects the split held out "
                         "(nonmembers.parquet, population.parquet)")


def set_of(row: pd.Series) -> str:
    """The set (forget, holdout, retain) a corpus row belongs to."""
    return "forget" if row["role"] == MEMBER else str(row[NONMEMBER_SET])


def check_comparable(before: ModelSource, after: ModelSource, name: str, trust_remote_code: bool) -> None:
    """Refuse a model whose architecture or tokenizer differs from the model before erasure: erasure changes weights,
    and scores of texts tokenized differently are no comparison."""
    from lmaudit.models.config_json import architecture_difference
    from lmaudit.models.tokenizer import tokenizer_difference

    difference = (architecture_difference(before, after)
                  or tokenizer_difference(before, after, trust_remote_code))
    if difference is not None:
        raise InputError(f"{after.folder}: --{name} differs from --before ({difference}); give the same model after "
                         "erasure (its weights changed, its architecture and tokenizer not)")


def language_model_family(source: ModelSource) -> str:
    """'mlm' or 'clm': the family of the model before erasure; InputError for a classifier (its membership signal
    needs a shadow model, which erasure does not train) or an architecture lmaudit does not know."""
    from lmaudit.models.config_json import model_family
    from lmaudit.models.folders import checked_source

    checked_source(source)
    family = model_family(source)
    if family not in ("mlm", "clm"):
        raise InputError(f"{source.folder}: --before is a {family}; lmaudit erasure audits masked and causal language "
                         "models")
    return family


def probe_scores(config: AuditConfig, erasure: ErasureSettings, family: str, corpus: pd.DataFrame, attack: str,
                 progress: bool) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The probes' scores beyond the after model as saved: loaded in each quantization, relearnt on half of every
    subject's texts (its relearned texts' scores NaN: the probe tests the other half only) and on the related public
    text; and the warnings about them."""
    after = erasure.sources()["after"]
    scored, warnings = {}, []
    for quantization in erasure.quantized:
        placement = config.placement.model_copy(update={"quantization": quantization})
        scored[f"after_{quantization}"], _ = membership_scores(config.model_copy(update={"placement": placement}),
                                                              after, corpus, attack, progress)
    if "after_relearned" in erasure.probes():
        audited = corpus["role"].eq(MEMBER) | corpus[NONMEMBER_SET].eq("holdout")
        relearned = np.zeros(len(corpus), bool)
        relearned[audited.to_numpy()] = relearned_rows(subject_names(corpus[audited]), config.evaluation.seed)
        model = relearned_model(after, family, corpus.loc[relearned, "text"].tolist(), relearned_folder(config.out),
                                erasure.relearn_epochs, erasure.relearn_learning_rate, config.evaluation.seed,
                                config.placement.device, progress)
        frame, _ = membership_scores(config, model, corpus, attack, progress)
        frame.loc[relearned, "score"] = np.nan
        scored["after_relearned"] = frame
    if "after_relearned_public" in erasure.probes():
        public, warnings = public_texts(erasure, corpus, config)
        model = relearned_model(after, family, public, relearned_folder(config.out, "relearned-public"),
                                erasure.relearn_epochs, erasure.relearn_learning_rate, config.evaluation.seed,
                                config.placement.device, progress)
        scored["after_relearned_public"], _ = membership_scores(config, model, corpus, attack, progress)
    return scored, warnings


def public_texts(erasure: ErasureSettings, corpus: pd.DataFrame, config: AuditConfig) -> tuple[list[str], list[str]]:
    """The related public text's texts, those identical to an audited text left out (templated notes repeat: relearning
    them would relearn an audited text), and a warning saying how many; InputError where it holds a subject of the
    forget, holdout or retain sets."""
    public = load_corpus(erasure.relearn_public, names=config.columns)
    shared = public[public["group_id"].notna() & public["group_id"].astype(str).isin(
        set(corpus["group_id"].dropna().astype(str)))]
    if len(shared):
        raise InputError(f"{row_location(shared.iloc[0])}: --relearn-public holds subject '{shared['group_id'].iloc[0]}'"
                         ", who is in the audited sets; give public text that none of the forget, holdout or retain "
                         "subjects wrote")
    kept = public[~public["text"].isin(set(corpus["text"]))]
    if kept.empty:
        raise InputError(f"{erasure.relearn_public}: --relearn-public holds no text that is not an audited one")
    left_out = len(public) - len(kept)
    warnings = ([f"{left_out} of {len(public)} texts of {erasure.relearn_public} are the very text of an audited one "
                 "(templated notes repeat) and were left out of the relearning"] if left_out else [])
    return kept["text"].tolist(), warnings


def membership_scores(config: AuditConfig, source: ModelSource, corpus: pd.DataFrame, attack: str,
                      progress: bool) -> tuple[pd.DataFrame, dict]:
    """Per text (sample_id order of `corpus`): the declared attack's membership score and the model's loss under
    `source`, and the model's files for the provenance."""
    resolved = resolve(config.model_copy(update={"target": source.folder, "adapter": source.adapter}), progress)
    scored, attacks, _ = signals_and_attacks(resolved, corpus)
    chosen = declared_attack(attacks, attack)
    frame = chosen.frame.set_index("id")["score"]
    samples = scored.samples.set_index("sample_id")
    loss = samples[f"target_{resolved.signal.signal}"]
    ids = corpus["sample_id"]
    return (pd.DataFrame({"score": frame.loc[ids].to_numpy(float), "loss": loss.loc[ids].to_numpy(float)}),
            model_files(resolved)["target"])


def declared_attack(attacks: list[AttackScores], name: str) -> AttackScores:
    """The sample-level scores of the attack `name`; InputError naming those that ran when it did not."""
    for attack in attacks:
        if attack.attack == name and attack.level == "sample":
            return attack
    ran = sorted({attack.attack for attack in attacks if attack.level == "sample"})
    raise InputError(f"--attack {name}: did not run on these models ({', '.join(ran)} did); choose one of them")


def audit_erasure(config: AuditConfig, erasure: ErasureSettings, progress: bool = False,
                  overwrite: bool = False) -> dict:
    """Run the erasure audit (module docstring), write erasure.json into `config.out` and return its document."""
    data = data_hashes([path for path in (erasure.forget, erasure.holdout, erasure.retain, erasure.relearn_public)
                        if path])
    corpus = erasure_corpus(erasure, config)
    models = erasure.sources()
    family = language_model_family(models["before"])
    for name, source in models.items():
        if name != "before":
            check_comparable(models["before"], source, name, config.placement.trust_remote_code)
    attack = erasure.attack or ("likelihood_ratio" if config.reference else "loss")
    given = {**config.model_dump(mode="json"), "erasure": erasure.model_dump(mode="json")}
    with output_lock(config.out):
        refuse_another_run(config.out, given, overwrite, RESULT_FILE)
        scored, files = {}, {}
        for name, source in models.items():
            scored[name], files[name] = membership_scores(config, source, corpus, attack, progress)
        probed, warnings = probe_scores(config, erasure, family, corpus, attack, progress)
        extraction, unextracted = (erasure_extraction(config, models, corpus, erasure.extraction_tokens,
                                                      subject_names(corpus), progress)
                                   if family == "clm" and erasure.extraction_tokens else (None, []))
        document = erasure_document(corpus, scored | probed, erasure, attack, config.evaluation, extraction)
        document |= {"models": files, "provenance": {"data": data}, "config": given,
                     "warnings": warnings + unextracted,
                     "environment": environment_info(config.placement.device)}
        typed = typed_document(RESULT_FILE, json_ready(headed(RESULT_FILE, document)))
        page = render_template("erasure.html.j2", report=typed, page=erasure_page(typed))
        written = write_document(config.out, RESULT_FILE, document, page=(PAGE_FILE, page))
        for stale in stale_files(Path(config.out), RESULT_FILE):  # the PDF of the erasure.json this one replaces
            stale.unlink()
        return written


def subject_names(corpus: pd.DataFrame) -> np.ndarray:
    """(n,) each text's subject as erasure.json names it: its group id, or 'text:<sample id>' for a holdout or retained
    text without one (a subject of its own)."""
    groups = corpus["group_id"]
    return np.where(groups.notna(), groups.astype(str), "text:" + corpus["sample_id"].astype(str))


def erasure_document(corpus: pd.DataFrame, scored: dict[str, pd.DataFrame], erasure: ErasureSettings, attack: str,
                     evaluation: EvaluationSettings, extraction: ErasureExtraction | None) -> dict:
    """erasure.json's findings from each model's per-text scores (aligned with `corpus`): the separations, the
    difference test, PrivLeak and the equivalence test, the retained subjects' exposure and the utility, the verdict;
    with the extraction estimate (before and after; None: not tested)."""
    sets = np.where(corpus["role"] == MEMBER, "forget", corpus[NONMEMBER_SET].astype(str))
    subjects = subject_names(corpus)
    audited = np.isin(sets, ("forget", "holdout"))
    groups, is_forget = subjects[audited], sets[audited] == "forget"
    permutations, bootstrap, seed = evaluation.permutations, evaluation.bootstrap, evaluation.seed

    def scores_of(name: str) -> np.ndarray:
        return scored[name]["score"].to_numpy()[audited]

    probes = {name: separation(name, scores_of(name), groups, is_forget, permutations, seed, bootstrap)
              for name in erasure.probes()}
    before = separation("before", scores_of("before"), groups, is_forget, permutations, seed, bootstrap)
    change = separation("change", scores_of("before") - scores_of("after"), groups, is_forget, permutations, seed,
                        bootstrap)
    retrained = scores_of("retrained") if "retrained" in scored else None
    findings = erasure_findings({name: scores_of(name) for name in probes}, scores_of("before"), groups, is_forget,
                                erasure.level, permutations, seed)
    holdout = sets == "holdout"
    tested_equivalence = equivalence(scores_of("after"), scores_of("before"), retrained, groups, is_forget,
                                     erasure.margin, erasure.level, bootstrap, seed)
    utility = mean_change("holdout loss", scored["before"]["loss"].to_numpy()[holdout],
                          scored["after"]["loss"].to_numpy()[holdout], subjects[holdout], bootstrap, seed)
    leak = (privleak_interval(scores_of("after"), retrained, groups, is_forget, bootstrap, seed)
            if retrained is not None else None)
    kept = np.isin(sets, ("retain", "holdout"))
    retain = (auc_change("retained subjects' AUC against holdout", scored["before"]["score"].to_numpy()[kept],
                         scored["after"]["score"].to_numpy()[kept], subjects[kept], sets[kept] == "retain", bootstrap,
                         seed) if (sets == "retain").any() else None)
    sections = {
        "attack": attack, "level": erasure.level, "subjects": sorted(set(groups[is_forget])),
        "counts": {name: {"texts": int((sets == name).sum()), "subjects": len(set(subjects[sets == name]))}
                   for name in SETS if (sets == name).any()},
        "probes": [asdict(probe) for probe in probes.values()], "before": asdict(before), "change": asdict(change),
        "findings": [asdict(finding) for finding in findings], "equivalence": asdict(tested_equivalence),
        "utility": asdict(utility), **({"privleak": asdict(leak)} if leak else {}),
        **({"retain_exposure": asdict(retain)} if retain else {}),
        **({"extraction": asdict(extraction)} if extraction else {}),
    }
    statements = erasure_statements(findings, probes["after"], change, erasure.level, tested_equivalence,
                                    estimate_sentences(utility, leak, retain)
                                    + extraction_sentences(extraction))
    return {**sections, "statements": statements}
