"""What a greedy party may do to its rows before it joins, for experiments: the same manipulation in every harness.

Why data attacks next to the histogram attacks (``node.attacks.histograms``): the contract refuses stretched
histograms because their exact identities break, but a party that changes its rows before joining sends histograms,
a PSD, a bin sketch and a carry that are all computed honestly from those rows, so every identity holds. What
such a party gains is what the contribution measure pays for row mass and identities rather than information.

Kinds (``factor`` F, the holder's ``n`` rows):

* ``duplicate``: every row copied F times (``floor(F)`` copies: F = 2 doubles the rows);
* ``jitter``: ``round((F - 1) * n)`` extra rows, each a copy of one of the holder's rows (in row order, cycling)
  with Gaussian noise of :data:`JITTER` times the feature's standard deviation (over the holder's rows) on every
  non-binary feature, rounded back on integer-valued features so that their values stay plausible;
* ``fitted``: ``round((F - 1) * n)`` extra rows drawn from the holder's own fitted distribution: a row's label drawn
  from the holder's labels, each feature drawn independently from the holder's rows of the same label stratum
  (the class; for a regression label its :data:`REGRESSION_STRATA` quantile bin), so every marginal is the
  holder's and no new information enters;
* ``split``: the holder's rows (unchanged) join as ``floor(F)`` parties of near-equal random shares: the first keeps
  the holder's index, the others are appended after the last party;
* ``clone``: the holder joins as ``floor(F)`` parties, the first with its rows, each other with a jittered copy of
  all of them (its own noise draw): copies and identities at once. Why it is played: if copying did not pay and
  splitting any holder's rows did not pay, a clone (copies, then split into one copy per identity) would not pay
  either, and to a measure that cannot tell copies from new rows its identities are ``F`` parties of the holder's
  population, whom equal treatment pays as such (the threat model's floor);
* ``fresh-clone``: ``clone`` with each copy's label drawn afresh from a model fitted to the holder's rows (its
  out-of-fold prediction: a Bernoulli draw of its probability for a binary label, its prediction plus one of the
  holder's residuals for a regression label), so that a copy does not repeat its original's label noise: what a greedy
  party plays against a test of copies' agreement or dispersion.

Two ways in, which give the same rows for the same seed: :func:`apply_to_parties` on a list of ``(X, y)`` pairs
(``fgbdt_chain.train``'s ``parties``), and :func:`apply_to_dataset` on pooled rows and each party's indices (``fgbdt
simulate`` and ``fgbdt train``, whose requester writes each party's shard from them: the greedy party's node starts
on the manipulated rows). Report the holder's combined share over its identities (:func:`holder_share`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fgbdt_chain.node.data.loaders import Dataset

DataAttackKind = Literal["duplicate", "jitter", "fitted", "split", "clone", "fresh-clone"]
DATA_ATTACK_KINDS: tuple[DataAttackKind, ...] = ("duplicate", "jitter", "fitted", "split", "clone", "fresh-clone")
CLONE_KINDS: tuple[DataAttackKind, ...] = ("clone", "fresh-clone")
"""The kinds whose extra identities each hold a copy of the holder's rows."""
IDENTITY_KINDS: tuple[DataAttackKind, ...] = ("split", *CLONE_KINDS)
"""The kinds whose factor is the holder's number of identities."""
JITTER = 0.01
"""Standard deviation of a jittered copy's noise, as a fraction of the feature's standard deviation: 1%."""
LABEL_FOLDS = 2
"""``fresh-clone``'s label model is fitted on one fold of the holder's rows and predicts the other, so that a copy's
label is not its original's fitted back."""
REGRESSION_STRATA = 10
"""Label strata of ``fitted`` for a regression label: its deciles over the holder's rows."""
_SEED_TAG = 0xDA7A
"""Separates the manipulation's random stream from every other stream seeded by the task's seed."""


def duplicate(X: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row ``k`` times (the originals, then ``k - 1`` more copies in the same order)."""
    if k < 1:
        raise ValueError(f"duplicate needs k >= 1 copies, got {k}")
    return np.tile(X, (k, 1)), np.tile(y, k)


def synthetic(
    X: np.ndarray,
    y: np.ndarray,
    extra: int,
    rng: np.random.Generator,
    kind: Literal["jitter", "fitted"] = "jitter",
) -> tuple[np.ndarray, np.ndarray]:
    """The rows followed by ``extra`` rows drawn near them: jittered copies or draws from the fitted distribution
    (module docstring)."""
    if extra < 0:
        raise ValueError(f"extra rows must be >= 0, got {extra}")
    if kind == "jitter":
        new_X, new_y = _jittered(X, y, extra, rng)
    elif kind == "fitted":
        new_X, new_y = _fitted(X, y, extra, rng)
    else:
        raise ValueError(f"unknown synthetic kind {kind!r}; use jitter or fitted")
    return np.vstack([X, new_X]), np.concatenate([y, new_y])


def _jittered(X: np.ndarray, y: np.ndarray, extra: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(extra) % len(y)
    out = X[rows].astype(np.float64, copy=True)
    for j in range(X.shape[1]):
        col = X[:, j]
        present = col[~np.isnan(col)]
        if np.unique(present).size <= 2:
            continue  # binary (or constant): noise would only say the row is made up
        noisy = out[:, j] + rng.normal(0.0, JITTER * float(np.std(present)), size=extra)
        out[:, j] = np.round(noisy) if np.all(present == np.round(present)) else noisy
    return out, y[rows].copy()


def _strata(y: np.ndarray) -> np.ndarray:
    """Each row's label stratum: its class when the labels are few (binary), else its quantile bin."""
    values = np.unique(y)
    if values.size <= 2:
        return np.searchsorted(values, y)
    cuts = np.quantile(y, np.linspace(0.0, 1.0, REGRESSION_STRATA + 1)[1:-1])
    return np.searchsorted(cuts, y, side="right")


def _fitted(X: np.ndarray, y: np.ndarray, extra: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    strata = _strata(y)
    anchors = rng.integers(0, len(y), size=extra)  # each new row's label (and stratum) from one of the holder's rows
    out = np.empty((extra, X.shape[1]), dtype=np.float64)
    for s in np.unique(strata[anchors]):
        members = np.flatnonzero(strata == s)
        mine = np.flatnonzero(strata[anchors] == s)
        picks = members[rng.integers(0, members.size, size=(mine.size, X.shape[1]))]
        out[mine] = X[picks, np.arange(X.shape[1])]
    return out, y[anchors].copy()


def clones(
    X: np.ndarray, y: np.ndarray, s: int, rng: np.random.Generator, *, fresh_labels: bool = False
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The rows of ``s - 1`` extra identities, each a jittered copy of all the holder's rows with its own noise (and,
    with ``fresh_labels``, its own draw of labels from the holder's label model)."""
    if s < 1:
        raise ValueError(f"clone needs s >= 1 identities, got {s}")
    copies = [_jittered(X, y, len(y), rng) for _ in range(s - 1)]
    if not fresh_labels or s == 1:
        return copies
    draw = _label_model(X, y, rng)
    return [(Xc, draw()) for Xc, _ in copies]


def _label_model(X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """A sampler of fresh labels for the holder's rows: each row's out-of-fold prediction by LightGBM with its
    defaults (fitted on the other fold), then a Bernoulli draw (binary labels) or one of the holder's out-of-fold
    residuals drawn at random (a regression label)."""
    import lightgbm as lgb  # only this attack needs it; the party node does not import it

    binary = bool(np.isin(np.unique(y), (0.0, 1.0)).all())
    fold = rng.permutation(len(y)) % LABEL_FOLDS
    predicted = np.empty(len(y), dtype=np.float64)
    for k in range(LABEL_FOLDS):
        train, test = fold != k, fold == k
        params = {"objective": "binary" if binary else "regression", "verbose": -1, "num_threads": 1}
        booster = lgb.train(params, lgb.Dataset(X[train], label=y[train], params={"verbose": -1}))
        predicted[test] = booster.predict(X[test])
    residuals = y - predicted

    def draw() -> np.ndarray:
        if binary:
            return (rng.random(len(y)) < predicted).astype(np.float64)
        return predicted + residuals[rng.integers(0, len(y), size=len(y))]

    return draw


def split(parts: Sequence[np.ndarray], holder: int, s: int, rng: np.random.Generator) -> tuple[list[Any], list[int]]:
    """``parts`` (one entry per party: its row indices, or anything indexable by rows) with the holder's entry cut
    into ``s`` near-equal random shares; and the holder's identities (its own index, then the appended parties')."""
    if s < 1:
        raise ValueError(f"split needs s >= 1 identities, got {s}")
    rows = len(parts[holder])
    if rows < s:
        raise ValueError(f"party {holder} has {rows} rows, too few to join as {s} parties")
    pieces = [np.sort(p) for p in np.array_split(rng.permutation(rows), s)]
    out = list(parts)
    out[holder] = pieces[0]
    out.extend(pieces[1:])
    identities = [holder, *range(len(parts), len(parts) + s - 1)]
    return out, identities


@dataclass(frozen=True)
class DataAttack:
    """A greedy party's manipulation of its own rows before it joins (module docstring)."""

    kind: DataAttackKind
    factor: float
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in DATA_ATTACK_KINDS:
            raise ValueError(f"unknown data attack {self.kind!r}; choose one of {', '.join(DATA_ATTACK_KINDS)}")
        if not (np.isfinite(self.factor) and self.factor >= 1):
            raise ValueError(f"the {self.kind} attack's factor must be a number >= 1, got {self.factor}")

    def rng(self, holder: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, _SEED_TAG, holder])

    def rows(self, X: np.ndarray, y: np.ndarray, holder: int) -> tuple[np.ndarray, np.ndarray]:
        """The holder's rows as it sends them (``split`` and the clones: its first identity's, unchanged)."""
        if self.kind == "duplicate":
            return duplicate(X, y, int(self.factor))
        if self.kind in ("jitter", "fitted"):
            extra = round((self.factor - 1.0) * len(y))
            return synthetic(X, y, extra, self.rng(holder), kind=self.kind)
        return X, y

    def clone_rows(self, X: np.ndarray, y: np.ndarray, holder: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The rows of the clones' extra identities (:func:`clones`)."""
        return clones(X, y, int(self.factor), self.rng(holder), fresh_labels=self.kind == "fresh-clone")

    def identities(self, parties: int, holder: int) -> list[int]:
        """The party indices the holder plays after the attack (one but for ``IDENTITY_KINDS``)."""
        if self.kind not in IDENTITY_KINDS:
            return [holder]
        return [holder, *range(parties, parties + int(self.factor) - 1)]


def apply_to_parties(
    parties: Sequence[tuple[Any, Any]], holder: int, attack: DataAttack
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[int]]:
    """``fgbdt_chain.train``'s ``parties`` with the holder's rows manipulated; and the holder's identities.

    The documented way to train with a manipulated party in Python::

        parties, identities = apply_to_parties(parties, 1, DataAttack("duplicate", 2))
        model = fgbdt_chain.train(params, parties)
        share = holder_share(model.contributions, identities)
    """
    if not 0 <= holder < len(parties):
        raise ValueError(f"holder must be a party index in [0, {len(parties)}), got {holder}")
    pairs = [(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)) for X, y in parties]
    X, y = pairs[holder]
    if attack.kind == "split":
        pieces, identities = split([np.arange(len(y))] * len(pairs), holder, int(attack.factor), attack.rng(holder))
        out = [pairs[i] if i != holder else (X[pieces[holder]], y[pieces[holder]]) for i in range(len(pairs))]
        out.extend((X[idx], y[idx]) for idx in pieces[len(pairs) :])
        return out, identities
    if attack.kind in CLONE_KINDS:
        return [*pairs, *attack.clone_rows(X, y, holder)], attack.identities(len(pairs), holder)
    pairs[holder] = attack.rows(X, y, holder)
    return pairs, [holder]


def apply_to_dataset(
    train: Dataset, parts: Sequence[np.ndarray], holder: int, attack: DataAttack
) -> tuple[Dataset, list[np.ndarray], list[int]]:
    """Pooled rows and each party's indices with the holder's rows manipulated (new rows appended to the pool, the
    other parties' rows untouched); and the holder's identities. Gives each party the rows :func:`apply_to_parties`
    gives it."""
    if not 0 <= holder < len(parts):
        raise ValueError(f"holder must be a party index in [0, {len(parts)}), got {holder}")
    parts = [np.asarray(p, dtype=np.int64) for p in parts]
    own = parts[holder]
    if attack.kind == "split":
        pieces, identities = split(parts, holder, int(attack.factor), attack.rng(holder))
        return (
            train,
            [parts[i] if i != holder else own[pieces[i]] for i in range(len(parts))]
            + [own[p] for p in pieces[len(parts) :]],
            identities,
        )
    if attack.kind in CLONE_KINDS:
        pooled, clone_parts = _appended(train, attack.clone_rows(train.X[own], train.y[own], holder))
        return pooled, [*parts, *clone_parts], attack.identities(len(parts), holder)
    X, y = attack.rows(train.X[own], train.y[own], holder)
    pooled, [added] = _appended(train, [(X[len(own) :], y[len(own) :])])
    parts[holder] = np.concatenate([own, added])
    return pooled, parts, [holder]


def _appended(train: Dataset, blocks: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[Dataset, list[np.ndarray]]:
    """The pool with each block of rows appended in order, and each block's indices in it."""
    starts = train.n_rows + np.cumsum([0, *(len(y) for _, y in blocks)])
    pooled = Dataset(
        np.vstack([train.X, *(X for X, _ in blocks)]),
        np.concatenate([train.y, *(y for _, y in blocks)]),
        train.feature_names,
        train.name,
    )
    return pooled, [np.arange(a, b, dtype=np.int64) for a, b in itertools.pairwise(starts)]


def holder_share(contributions: Sequence[dict[str, Any]], identities: Sequence[int]) -> float:
    """The holder's combined reward share: the sum of its identities' shares."""
    return float(sum(c["share"] for c in contributions if c["party"] in set(identities)))


def manipulation_report(attack: DataAttack, holder: int, identities: Sequence[int], contributions: Any) -> dict:
    """What a report says about the manipulation: its kind and factor, the holder's identities and combined share."""
    out: dict[str, Any] = {
        "holder": holder,
        "kind": attack.kind,
        "factor": attack.factor,
        "identities": list(identities),
    }
    if contributions:
        out["holder_share"] = holder_share(contributions, identities)
    return out
