"""A party node whose rows are a Parquet dataset (``fgbdt node --config`` with a ``[parquet]`` table), read in small
chunks, trains a task on chain beside in-memory parties: the simulator's model and contributions, the others'
histograms endorsed by its chunked verifier, and the audit passes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from eth_account import Account

from fgbdt_chain.deploy.requester import BlockClock, ChainSetup, Party, Requester
from fgbdt_chain.ledger.audit.replay import audit_events, read_task
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.node.data.loaders import load_train_test
from fgbdt_chain.node.data.parquet import write_rows
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run

pytestmark = [pytest.mark.chain, pytest.mark.slow]

PARAMS = TrainParams(trees=3, depth=3, bins=8, min_rows=5)
CONFIG = PrepConfig(parties=3, theta=0.8, seed=0, psd_max_rows=40, dp_noise="seeded")
PARQUET_PARTY = 1
CHUNK_ROWS = 37


class ParquetRequester(Requester):
    """The requester of ``deploy.requester``, but party ``PARQUET_PARTY`` is given its rows as a Parquet dataset in
    a config file's ``[parquet]`` table instead of ``--data`` (with ``dask``: the scheduler's address and two parts,
    one on each of its workers)."""

    dask: tuple[str, list[str]] | None = None

    def spawn(self, args: list[str], log_path: Path) -> Party:
        if log_path.name == f"party-{PARQUET_PARTY}.log":
            work = self.setup.workdir
            part = self.prep.train.subset(self.prep.parts[PARQUET_PARTY])
            write_rows(work / "rows", part.X, part.y, rows_per_file=100, row_group_rows=CHUNK_ROWS)
            table = f'[parquet]\nrows = "rows"\nslots = "slots"\nchunk_rows = {CHUNK_ROWS}\n'
            if self.dask is not None:
                scheduler, workers = self.dask
                n, cut = part.X.shape[0], part.X.shape[0] // 3
                table += f'scheduler = "{scheduler}"\nparts = [\n'
                for (start, rows), worker, name in zip([(0, cut), (cut, n - cut)], workers, "ab", strict=True):
                    path = work / f"part-{name}"
                    table += f'  {{ path = "{path}", start = {start}, rows = {rows}, worker = "{worker}" }},\n'
                table += "]\n"
            (work / "node.toml").write_text(table)
            at = args.index("--data")
            args = [*args[:at], "--config", str(work / "node.toml"), *args[at + 2 :]]
            self.commands[PARQUET_PARTY] = args
        return super().spawn(args, log_path)


@pytest.mark.parametrize("on_dask", [False, True], ids=["chunks", "two-dask-workers"])
def test_a_parquet_party_node_trains_and_endorses_as_an_in_memory_one(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path, on_dask: bool
) -> None:
    if not on_dask:
        _train_and_compare(anvil_node, e2e_contract, toy_csv, tmp_path, None)
        assert len(list((tmp_path / "slots").iterdir())) > 1  # its slots written chunk by chunk
        return
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        workers = sorted(client.scheduler_info()["workers"])
        _train_and_compare(anvil_node, e2e_contract, toy_csv, tmp_path, (cluster.scheduler_address, workers))
    assert not (tmp_path / "slots").exists()  # the slots are the parts' files, written by the workers
    for name in "ab":
        assert len(list((tmp_path / f"part-{name}").iterdir())) > 1


def _train_and_compare(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path, dask: tuple[str, list[str]] | None
) -> None:
    """The task with party ``PARQUET_PARTY`` from Parquet: the simulator's model and contributions, audited OK."""
    train, test = load_train_test(toy_csv, seed=0)
    prep = prepare(train, test, PARAMS, CONFIG)
    assert prep.parts[PARQUET_PARTY].size > 5 * CHUNK_ROWS
    client = ChainClient.connect(anvil_node.url)
    requester = Account.create()
    client.fund(requester.address, 10**21)
    setup = ChainSetup(rpc=anvil_node.url, contract=e2e_contract, requester=requester, workdir=tmp_path)
    req = ParquetRequester(prep, setup)
    req.dask = dask
    start = time.monotonic()
    try:
        req.open_task()
        with BlockClock(req.client, setup.clock_tick):
            req.launch_parties()
            req.approve_and_start()
            req.follow()
        assert req.wait_parties() == [0] * CONFIG.parties
    finally:
        req.stop_parties()
    report = req.report(time.monotonic() - start)
    log = (tmp_path / f"party-{PARQUET_PARTY}.log").read_text()
    assert f"{prep.parts[PARQUET_PARTY].size} rows" in log and "--config" in " ".join(req.commands[PARQUET_PARTY])
    sim_report, sim_model, sim = run(prep, "fvtree", keep_levels=True)
    assert sim_model is not None and sim is not None
    chain = model_from_chain(req.task, req.task_id)
    assert chain.edges == sim_model.edges and chain.trees == sim_model.trees
    assert [c["total_fixed"] for c in report["contributions"]] == [str(t) for t in sim.total]
    assert report["test_error"] == sim_report["test_error"]
    assert report["rejected_histograms"] == [0] * CONFIG.parties
    audit = audit_events(read_task(req.client, e2e_contract, req.task_id))
    assert audit.ok and audit.completed, audit.first_mismatch
