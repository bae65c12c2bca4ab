"""The sampling settings each row was measured with (bench's ``temperature``, ``top_p``,
``max_tokens`` and ``ignore_eos``), and what differs between a run's and its baseline's:
``compare``'s ``sampling_differs``.

A row says them in its own columns (:data:`breakeven.core.schema.SAMPLING_COLUMNS`), else in
its ``env``'s ``sampling_*`` pairs (a bench row appended to a file written before the columns
were: :data:`breakeven.core.provenance.SAMPLING_PREFIX`); a row that says neither (an older
file, an engine log) has no known sampling, and is never flagged for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.provenance import SAMPLING_PREFIX, key_of
from breakeven.core.schema import SAMPLING_COLUMNS


def _value_text(value: Any) -> str:
    """One cell as a sampling text holds it: a number as ``:g`` writes it, a text lower case
    and stripped; empty for a missing one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return str(value).strip().lower()


def _pairs_text(pairs: Iterable[tuple[str, Any]]) -> str:
    """``key=value`` for each known setting, in :data:`SAMPLING_COLUMNS`' order."""
    known = {key: text for key, value in pairs if (text := _value_text(value))}
    return " ".join(f"{key}={known[key]}" for key in SAMPLING_COLUMNS if key in known)


def env_sampling(env: str) -> str:
    """The sampling settings an ``env`` records in its ``sampling_*`` pairs, as
    :func:`row_sampling` writes them; empty where it records none."""
    pairs = []
    for item in str(env).split():
        key = key_of(item)
        if key.startswith(SAMPLING_PREFIX) and "=" in item:
            name = key[len(SAMPLING_PREFIX) :]
            value = item.split("=", 1)[1]
            if name in SAMPLING_COLUMNS:
                number = pd.to_numeric(value, errors="coerce")
                pairs.append((name, value if name == "ignore_eos" or np.isnan(number) else number))
    return _pairs_text(pairs)


def row_sampling(df: Any) -> Any:
    """Each row's sampling settings as one text, ``temperature=0 top_p=1 max_tokens=512
    ignore_eos=true`` (the settings it knows; empty where it knows none), from its sampling
    columns, else its ``env``.  ``df``: normalised rows (:func:`~breakeven.measurements.
    normalise.normalise`: every sampling column present, ``env`` a category)."""
    columns = [c for c in SAMPLING_COLUMNS if c in df.columns]
    texts = np.full(len(df), "", dtype=object)
    if columns and len(df):
        frame = df[columns]
        group = frame.groupby(columns, dropna=False, observed=True, sort=False).ngroup()
        group = group.to_numpy()
        firsts = pd.Series(np.arange(len(df))).groupby(group).first().to_numpy()
        by_group = [_pairs_text(zip(columns, frame.iloc[i], strict=True)) for i in firsts]
        texts = np.asarray(by_group, dtype=object)[group]
    if "env" in df.columns and len(df):
        envs = df["env"].astype("category")
        from_env = envs.map({e: env_sampling(e) for e in envs.cat.categories})
        from_env = np.asarray(from_env.astype(object).fillna(""), dtype=object)
        texts = np.where(texts == "", from_env, texts)
    return pd.Series(texts, index=df.index, dtype=object).astype("category")


def sampling_difference(spec: Iterable[str], baseline: Iterable[str]) -> tuple[str, str] | None:
    """What differs between the sampling of a run's rows (``spec``, :func:`row_sampling`'s
    texts) and of its baseline's rows: each side's values of the settings both know and
    disagree on, ``key=value`` joined by a space (several values of one key by ``/``); None
    where they agree on every setting both know (or both know none)."""
    sides = []
    for texts in (spec, baseline):
        known: dict[str, set[str]] = {}
        for text in set(texts):
            for item in str(text).split():
                key, _, value = item.partition("=")
                known.setdefault(key, set()).add(value)
        sides.append(known)
    differ = [
        key
        for key in SAMPLING_COLUMNS
        if key in sides[0] and key in sides[1] and sides[0][key] != sides[1][key]
    ]
    if not differ:
        return None
    return _side_text(sides[0], differ), _side_text(sides[1], differ)


def _side_text(known: dict[str, set[str]], keys: Iterable[str]) -> str:
    """One side's settings among ``keys``: ``temperature=0 max_tokens=256/512``."""
    return " ".join(f"{key}={'/'.join(sorted(known[key]))}" for key in keys)
