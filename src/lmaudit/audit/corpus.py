"""The audited corpus: every role file loaded into one validated table, with the checks every audit relies on (enough
members and non-members, roles and non-member sets disjoint by group)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.config import RoleFile
from lmaudit.data.columns import DEFAULT_COLUMNS, ColumnNames
from lmaudit.data.corpus import combine_corpora, generated_id_prefixes, load_corpus
from lmaudit.data.roles import (
    AUDITED_ROLES,
    NONMEMBER,
    NONMEMBER_SET,
    ROLES,
    check_audit_roles,
)


def load_audit_corpus(role_files: list[RoleFile], columns: tuple[str, ...] = (),
                      names: ColumnNames = DEFAULT_COLUMNS) -> pd.DataFrame:
    """Load every role file (its columns named as `names` says) into one validated corpus (unique ids, roles and
    non-member sets disjoint by group), with the extra `columns` and each non-member's set (NONMEMBER_SET)."""
    prefixes = generated_id_prefixes(f.path for f in role_files)
    parts = []
    for role_file in role_files:
        part = load_corpus(role_file.path, role_file.role, columns, prefixes[str(role_file.path)], names)
        set_name = role_file.nonmember_set or Path(role_file.path).stem
        part[NONMEMBER_SET] = np.where(part["role"] == NONMEMBER, set_name, None)
        parts.append(part)
    return checked_audit_corpus(combine_corpora(parts))


def checked_audit_corpus(corpus: pd.DataFrame) -> pd.DataFrame:
    """The corpus, once its roles are checked: enough members and non-members, every other role non-empty, roles (and
    non-member sets) disjoint by group (InputError naming the first problem)."""
    present = set(corpus["role"])
    check_audit_roles(corpus, [role for role in ROLES if role in present and role not in AUDITED_ROLES])
    return corpus


def audited_set_column(corpus: pd.DataFrame) -> list[str]:
    """[NONMEMBER_SET] when the corpus's non-members come in two or more sets (so that results are reported per set),
    else []."""
    return [NONMEMBER_SET] if NONMEMBER_SET in corpus and corpus[NONMEMBER_SET].nunique() > 1 else []
