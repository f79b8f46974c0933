"""What a node whose rows are a Parquet dataset does not play is refused by name when it starts, before it joins; a
slots folder holding other rows' files is refused when training starts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.parquet import write_rows, write_slots
from fgbdt_chain.node.party.joining import Joiner, _chunked_refusal
from fgbdt_chain.node.party.session import NodeError, NodeSettings
from fgbdt_chain.node.protocol.chunked_party import DaskPart
from fgbdt_chain.node.protocol.endorsement import EndorsementRule
from fgbdt_chain.node.protocol.parquet_party import ParquetParty

LOCAL = ParquetParty(Path("rows"), Path("slots"))
STATISTICAL = EndorsementRule(ref.ENDORSE_STATISTICAL)


def test_a_public_task_under_the_statistical_rule_is_played() -> None:
    assert _chunked_refusal(LOCAL, STATISTICAL, NodeSettings()) is None
    dask = ParquetParty(Path("rows"), Path("slots"), scheduler="tcp://h:8786", parts=(DaskPart("p", 0, 10),))
    assert _chunked_refusal(dask, STATISTICAL, NodeSettings()) is None


@pytest.mark.parametrize(
    ("party", "rule", "settings", "error"),
    [
        (LOCAL, EndorsementRule(ref.ENDORSE_STATISTICAL, private=True), NodeSettings(), "privacy budget"),
        (LOCAL, EndorsementRule(ref.ENDORSE_OVERLAP), NodeSettings(), "statistical rule only"),
        (LOCAL, STATISTICAL, NodeSettings(attack=Attack("gradients", 2.0)), "no attack"),
        (
            ParquetParty(Path("rows"), Path("slots"), scheduler="tcp://h:8786"),
            STATISTICAL,
            NodeSettings(),
            "a scheduler needs parts",
        ),
    ],
    ids=["private", "overlap", "attack", "scheduler-without-parts"],
)
def test_what_a_parquet_node_does_not_play_is_named(
    party: ParquetParty, rule: EndorsementRule, settings: NodeSettings, error: str
) -> None:
    refusal = _chunked_refusal(party, rule, settings)
    assert refusal is not None and error in refusal


def test_a_slots_folder_holding_other_rows_is_refused_when_training_starts(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(50, 2)), (rng.random(50) < 0.5).astype(float)
    party = ParquetParty(write_rows(tmp_path / "rows", X, y), tmp_path / "slots", chunk_rows=20)
    (tmp_path / "slots").mkdir()
    # the chunk files of an earlier run of more rows: the fourth is beyond the three this run writes (20, 20, 10)
    write_slots(tmp_path / "slots", iter([np.zeros((20, 2), np.uint8)] * 4), 2)
    session = SimpleNamespace(data=party, settings=NodeSettings(), params=TrainParams(bins=4))
    joiner = Joiner.__new__(Joiner)
    joiner.s = session  # type: ignore[assignment]
    with pytest.raises(NodeError, match="70 rows of slots for 50 rows"):
        joiner._chunked([np.array([0.0]), np.array([0.0])], [], [])
