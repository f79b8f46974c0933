"""The privacy audit on the real mechanisms stays below the claimed epsilon, and flags broken ones."""

from __future__ import annotations

import pytest

from bench.privacy_audit import Setting, audit_run, summary, tables

CLAIMED = 1.0


@pytest.mark.parametrize(
    ("setting", "broken"),
    [
        (Setting("randomsplit", "real"), False),
        (Setting("randomsplit", "noise-off"), True),
        (Setting("fvtree", "real", trees=2, depth=2), False),
        (Setting("fvtree", "range-leak", trees=2, depth=2), True),
    ],
    ids=["randomsplit-real", "randomsplit-noise-off", "fvtree-real", "fvtree-range-leak"],
)
def test_the_audit_holds_the_real_mechanism_and_flags_a_broken_one(setting: Setting, broken: bool) -> None:
    result = audit_run(setting, seed=0)
    assert result.r == setting.canaries // 2
    bound = result.epsilon_lower_bound
    if broken:
        assert result.v == result.r  # every guess right: the canaries are found
        assert bound > CLAIMED
    else:
        assert bound < CLAIMED


def test_the_summary_pools_runs_and_says_whether_the_claim_is_refuted() -> None:
    rows = [
        {"algo": "randomsplit", "mechanism": "noise-off", "epsilon": 1.0, "seed": s, "m": 40, "r": 20, "v": 20}
        for s in range(2)
    ]
    (s,) = summary(rows)
    assert (s["runs"], s["guesses"], s["right"], s["flagged"]) == (2, 40, 40, True)
    assert "| randomsplit | noise-off | 1 | 2 | 80 | 40 | 40 |" in tables([{"results": {"rows": rows}}])


def test_a_setting_names_what_it_cannot_audit() -> None:
    with pytest.raises(ValueError, match="fvtree audits real, range-leak"):
        Setting("fvtree", "noise-off")
