"""A level's histograms in the contract's word layout, both ways: what an endorsement request carries and what the
``HistogramsSubmitted`` events hold."""

from __future__ import annotations

from collections.abc import Sequence

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.encoding import block_histograms, node_block


def node_blocks(hists: Sequence[ref.NodeHistograms]) -> list[list[int]]:
    """Each open node's histograms as one block of words (``g[2*nbins] | h[2*nbins] | n[2*nbins]``)."""
    return [node_block(h) for h in hists]


def unblock(words: Sequence[int], candidates: Sequence[tuple[int, int]], nbins: int) -> list[ref.NodeHistograms]:
    """Per-node histograms from the contract layout ``g[2*nbins] | h[2*nbins] | n[2*nbins]`` per node."""
    width = 6 * nbins
    if len(words) != width * len(candidates):
        raise ValueError(f"{len(words)} words for {len(candidates)} nodes of {width}")
    return [
        block_histograms(words[j * width : (j + 1) * width], (cand[0], cand[1]), nbins)
        for j, cand in enumerate(candidates)
    ]
