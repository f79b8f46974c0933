"""What a node whose rows are a Parquet dataset does not play is refused by name when it starts, before it joins."""

from __future__ import annotations

from pathlib import Path

import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.party.joining import _chunked_refusal
from fgbdt_chain.node.party.session import NodeSettings
from fgbdt_chain.node.protocol.chunked_party import DaskPart
from fgbdt_chain.node.protocol.endorsement import EndorsementRule
from fgbdt_chain.node.protocol.parquet_party import ParquetParty

LOCAL = ParquetParty(Path("rows"), Path("slots"))
STATISTICAL = EndorsementRule(ref.ENDORSE_STATISTICAL)


def test_a_public_task_under_the_statistical_rule_is_played() -> None:
    assert _chunked_refusal(LOCAL, STATISTICAL, NodeSettings()) is None


@pytest.mark.parametrize(
    ("party", "rule", "settings", "error"),
    [
        (LOCAL, EndorsementRule(ref.ENDORSE_STATISTICAL, private=True), NodeSettings(), "privacy budget"),
        (LOCAL, EndorsementRule(ref.ENDORSE_OVERLAP), NodeSettings(), "statistical rule only"),
        (LOCAL, STATISTICAL, NodeSettings(attack=Attack("gradients", 2.0)), "no attack"),
        (
            ParquetParty(Path("rows"), Path("slots"), scheduler="tcp://h:8786", parts=(DaskPart("p", 0, 10),)),
            STATISTICAL,
            NodeSettings(),
            "scheduler and parts are not node settings",
        ),
    ],
    ids=["private", "overlap", "attack", "dask"],
)
def test_what_a_parquet_node_does_not_play_is_named(
    party: ParquetParty, rule: EndorsementRule, settings: NodeSettings, error: str
) -> None:
    refusal = _chunked_refusal(party, rule, settings)
    assert refusal is not None and error in refusal
