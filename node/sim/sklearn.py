"""scikit-learn estimators over ``fgbdt_chain.train``: ``FGBDTClassifier`` and ``FGBDTRegressor``.

Why: most Python users reach a model through scikit-learn's conventions (``fit``/``predict``, ``cross_val_score``,
``Pipeline``, grid search over ``get_params``). The estimators hold plain parameters and, in ``fit``, assign the rows
to parties (``party=``, or the simulator's seeded skew rule over ``parties`` with ``theta``, ``node.data.partition``)
and call ``train``, whose one parameter table (``node.sim.engine.PARAMS``) knows the scikit-learn spellings used here
(``n_estimators``, ``reg_lambda``, ``max_bin``, ``min_child_samples``, ``random_state``).

Both pass scikit-learn's ``check_estimator``; what they declare to it: missing values are accepted (``allow_nan``,
NaN is "missing" in the protocol), so the NaN/inf rejection check does not run, while inf is still refused; sparse
input is accepted (absent entries are 0); the classifier is binary only (``multi_class = False``: the protocol is
binary logistic or squared error), so multiclass targets raise "Only binary classification is supported".
Not applicable, so scikit-learn does not yield them: ``check_estimators_nan_inf`` (NaN is allowed, see above), the
``sample_weight`` checks (the protocol has no row weights: a party's histograms are plain sums, so ``fit`` takes
none) and ``check_class_weight_classifiers``. Skipped by scikit-learn itself unless the environment allows them:
``check_array_api_input`` without ``SCIPY_ARRAY_API=1`` set before scipy loads (``tests/node/sim/test_python_api.py``
runs it in a fresh interpreter with it set) and the pandas variants of ``check_*_data_not_an_array`` without pandas.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from fgbdt_chain.node.data.inputs import dense_features
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.engine import train
from fgbdt_chain.node.sim.experiment import PrepConfig, partition

__all__ = ["FGBDTClassifier", "FGBDTRegressor"]

_SPLIT_PARAMS = ("parties", "theta", "feature_skew", "importance_type")
"""Estimator parameters that ``fit`` uses itself; every other one goes to ``train``'s parameter table."""


class _FGBDTModel(BaseEstimator):
    """What both estimators share: the parameters, the split into parties, the model and its importances.

    Parameters left at None take ``fgbdt simulate``'s defaults, the task parameters' from ``ledger.spec.parameters``
    (through ``TrainParams`` and ``PrepConfig``), except ``random_state``: None is the project's seed 0, so that a
    federation is reproducible by default.
    """

    _objective: str = "binary"

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        max_depth: int | None = None,
        learning_rate: float | None = None,
        reg_lambda: float | None = None,
        max_bin: int | None = None,
        min_child_samples: int | None = None,
        parties: int = 4,
        theta: float = 0.8,
        feature_skew: float = 0.0,
        random_state: int | np.random.RandomState | None = None,
        algo: str | None = None,
        endorse: str | None = None,
        hessian: str | None = None,
        tie_break: str | None = None,
        delta: float | None = None,
        alpha: float | None = None,
        binning: str | None = None,
        binning_epsilon: float | None = None,
        psd_epsilon: float | None = None,
        epsilon: float | None = None,
        dp_delta: float | None = None,
        dp_colluders: int | None = None,
        dp_noise: str | None = None,
        tree_features: str | None = None,
        feature_ranges: Any = None,
        integer_features: Any = None,
        label_min: float | None = None,
        label_max: float | None = None,
        importance_type: str = "split",
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.reg_lambda = reg_lambda
        self.max_bin = max_bin
        self.min_child_samples = min_child_samples
        self.parties = parties
        self.theta = theta
        self.feature_skew = feature_skew
        self.random_state = random_state
        self.algo = algo
        self.endorse = endorse
        self.hessian = hessian
        self.tie_break = tie_break
        self.delta = delta
        self.alpha = alpha
        self.binning = binning
        self.binning_epsilon = binning_epsilon
        self.psd_epsilon = psd_epsilon
        self.epsilon = epsilon
        self.dp_delta = dp_delta
        self.dp_colluders = dp_colluders
        self.dp_noise = dp_noise
        self.tree_features = tree_features
        self.feature_ranges = feature_ranges
        self.integer_features = integer_features
        self.label_min = label_min
        self.label_max = label_max
        self.importance_type = importance_type

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # ---------------------------------------------------------------------------------------------------- fitting

    def _seed(self) -> int:
        if self.random_state is None:
            return 0
        if isinstance(self.random_state, numbers.Integral) and not isinstance(self.random_state, bool):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def _train_params(self) -> dict[str, Any]:
        given = {k: v for k, v in self.get_params(deep=False).items() if k not in _SPLIT_PARAMS and v is not None}
        return {**given, "objective": self._objective, "random_state": self._seed()}

    def _parts(self, X: np.ndarray, y: np.ndarray, party: Any) -> list[np.ndarray]:
        """Each party's rows: by ``party`` (one label per row, any values, parties in sorted order of them), else
        the simulator's seeded skew rule over ``parties`` with ``theta`` and ``feature_skew``."""
        n = X.shape[0]
        if party is not None:
            owner = np.asarray(party)
            if owner.ndim != 1 or owner.shape[0] != n:
                raise ValueError(f"party must give one party per row: {n} rows, party has shape {owner.shape}")
            return [np.flatnonzero(owner == p) for p in np.unique(owner)]
        if isinstance(self.parties, bool) or not isinstance(self.parties, numbers.Integral) or self.parties < 2:
            raise ValueError(f"parties must be an integer >= 2, got {self.parties!r}")
        if n < self.parties:
            raise ValueError(f"{n} sample(s) for {self.parties} parties: every party needs at least one row")
        config = PrepConfig(
            parties=int(self.parties), theta=self.theta, seed=self._seed(), feature_skew=self.feature_skew
        )
        parts = partition(Dataset(X, y), config)
        empty = [i for i, idx in enumerate(parts) if idx.size == 0]
        if empty:
            raise ValueError(
                f"the skewed split (theta {self.theta}) of {n} sample(s) over {self.parties} parties leaves "
                f"part{'y' if len(empty) == 1 else 'ies'} {empty} without rows; use fewer parties or more rows"
            )
        return parts

    def _fit(self, X: Any, y: np.ndarray, party: Any) -> None:
        dense = dense_features(X, finite=True)
        parts = self._parts(dense, y, party)
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        self.model_: Model = train(self._train_params(), [(dense[idx], y[idx]) for idx in parts], names)
        self.contributions_: list[dict[str, Any]] = self.model_.contributions or []
        self.n_parties_: int = len(parts)

    def _raw(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=True, ensure_all_finite="allow-nan", reset=False)
        return self.model_.predict_raw(X)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Per feature, ``importance_type="split"``: how many splits use it (as LightGBM's default);
        ``"gain"``: the sum of their split gains (the grand coalition's gain, which split Shapley divides among
        the parties). Not normalised."""
        check_is_fitted(self)
        return self.model_.feature_importance(self.importance_type)


class FGBDTClassifier(ClassifierMixin, _FGBDTModel):
    """Binary classifier trained by the simulated FGBDT-Chain federation (the protocol's logistic loss).

    ``fit(X, y, party=None)``: ``party`` assigns each row to a party (any labels); without it the rows are split
    over ``parties`` by the seeded label-skew rule with ``theta`` (and ``feature_skew``), as ``fgbdt simulate``
    splits a file. ``y`` may hold any two classes (``classes_``: 0/1, -1/1, strings); more than two is an error,
    one class too. After fitting: ``model_`` (a ``fgbdt_chain.Model``), ``contributions_`` (each party's split
    Shapley and voting contributions and share), ``classes_``, ``n_features_in_``, ``feature_names_in_`` (pandas
    input) and ``feature_importances_``. ``predict_proba`` returns (n, 2); ``decision_function`` the raw score.
    """

    _objective = "binary"

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X: Any, y: Any, party: Any = None) -> FGBDTClassifier:
        X, y = validate_data(self, X, y, accept_sparse=True, ensure_all_finite="allow-nan")
        check_classification_targets(y)
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind != "binary":
            raise ValueError(f"Only binary classification is supported. The type of the target is {kind}.")
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"y has one class ({classes[0]!r}): binary classification needs both classes")
        self.classes_: np.ndarray = classes
        self._fit(X, (y == classes[1]).astype(np.float64), party)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """The raw score (log-odds of ``classes_[1]``)."""
        return self._raw(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities of ``classes_[0]`` and ``classes_[1]``, shape (n, 2)."""
        p = 1.0 / (1.0 + np.exp(-self._raw(X)))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """``classes_[1]`` where its probability exceeds 0.5, else ``classes_[0]``."""
        check_is_fitted(self)
        return self.classes_[(self.predict_proba(X)[:, 1] > 0.5).astype(np.intp)]


class FGBDTRegressor(RegressorMixin, _FGBDTModel):
    """Regressor trained by the simulated FGBDT-Chain federation (the protocol's squared error).

    ``fit(X, y, party=None)`` splits rows as :class:`FGBDTClassifier` does (the skew rule takes "above the median"
    as its class); ``predict`` returns the predicted values. Fitted attributes as the classifier's, without
    ``classes_``.
    """

    _objective = "regression"

    def fit(self, X: Any, y: Any, party: Any = None) -> FGBDTRegressor:
        X, y = validate_data(self, X, y, accept_sparse=True, ensure_all_finite="allow-nan", y_numeric=True)
        self._fit(X, np.asarray(y, dtype=np.float64), party)
        return self

    def predict(self, X: Any) -> np.ndarray:
        return self._raw(X)
