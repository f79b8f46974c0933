"""Training on chain (anvil, separate party processes) next to ``simulate`` on the same settings.

Starts its own anvil, deploys, and runs one task; reports wall time, transactions, gas and bytes on chain
(calldata), the ratio to the simulator's training time on the same partition, bins, seed and parameters, whether the
two models are identical, where each party's time went, and the CPU seconds anvil, the parties and the requester
used: their sum over the machine's cores is a floor on the wall time that no waiting or round trip adds to.

The wall time runs from the task's creation to its report, the parties' host loaded (``deploy.party_forks``: imports
and compiled kernels, 1.4 s of one core), as ``simulate`` is timed after its own imports and kernels.
``party_load_seconds`` is that loading and ``ratio_with_load`` the ratio with it added (more than a cold run takes:
there the requester's first transactions overlap the loading); ``--cold`` puts the loading on the clock, as a
cold start pays it.

    python -m bench.chain --data a9a --parties 4 --theta 0.8 --trees 50 --depth 6 [--algo drawn]

``--budget SECONDS`` stops the task after that much wall time and reports what was trained so far (trees, levels,
transactions, gas, calldata) with the per-tree rate: the paper's settings (500 trees, depth 8) take hours on chain,
so their figure is a measured prefix plus a labelled extrapolation.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eth_account import Account

from bench.datasets import load, objective
from bench.level_rounds import level_rounds, party_moments, sentence, summary
from bench.record import Run, parameters_of
from bench.stats import mean_se
from fgbdt_chain.deploy.party_forks import PartyForks, fork_available
from fgbdt_chain.deploy.requester import BlockClock, ChainSetup, Requester, run_task
from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.modes import ON_CHAIN_ALGORITHMS
from fgbdt_chain.ledger.spec.task_params import DEFAULT_VOTED_TREES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskContract
from fgbdt_chain.node.kernels.parallel import default_threads
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run
from fgbdt_chain.node.sim.warmup import warm_up

USAGE_FIELDS = ("tx_count", "blocks", "gas_used", "calldata_bytes", "max_tx_bytes", "max_tx_gas")
"""The train report's chain counters (``ledger.rpc.usage``) every result of this bench carries."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--algo", choices=ON_CHAIN_ALGORITHMS, default="fvtree", help="fvtree (votes, then drawn) or drawn")
    ap.add_argument("--voted-trees", type=int, default=DEFAULT_VOTED_TREES, help="fvtree: trees that vote")
    ap.add_argument(
        "--min-rows",
        type=int,
        default=TrainParams.min_rows,
        help="rows a side of a split needs (more: trees stop short)",
    )
    ap.add_argument("--tick", type=float, default=0.25)
    ap.add_argument(
        "--block-time",
        type=float,
        default=None,
        help="mine a block every this many seconds, as a permissioned network would (default: a block per transaction)",
    )
    ap.add_argument("--budget", type=float, default=None, help="stop after this many seconds (partial run)")
    ap.add_argument(
        "--cold",
        action="store_true",
        help="start the clock before the parties' host loads a node (1.4 s), as a cold start pays it; by default "
        "it starts once the host has loaded, as simulate's starts after its imports and compiled kernels",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="times to measure (simulate, then the task on a fresh chain), for a mean and standard error",
    )
    ap.add_argument("--out", help="results file (default bench/results/chain.json, bench.record)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    # --repeat only says how many times: runs of one setting on one code pool their repetitions (bench.record)
    record = Run("chain", parameters_of(args, drop=("repeat",)), args.out)
    train, test = load(args.data, args.seed)
    params = TrainParams(
        trees=args.trees,
        depth=args.depth,
        bins=args.bins,
        voted_trees=args.voted_trees,
        min_rows=args.min_rows,
        objective=objective(args.data),  # type: ignore[arg-type]
    )
    warm_up()  # before the preparation, whose kernels it loads too: the parties load theirs before the clock starts
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    if args.budget is not None:
        if args.repeat != 1:
            ap.error("--budget measures one partial run: --repeat 1")
        report, wall, sim_report, workdir = _task(args, prep)
        return _report_partial(args, record, report, wall, sim_report, workdir)
    repetitions: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        repetitions.append(_repetition(args, prep, params))
        record.save({"repetitions": repetitions}, complete=False)  # a stopped series keeps what it measured
    record.save({"repetitions": repetitions})
    print(tables([{"parameters": record.parameters, "results": {"repetitions": repetitions}}]))
    last = repetitions[-1]
    for i, split in enumerate(last["party_time_split"]):
        print(f"- party {i} in the last repetition: {split}")
    return 0


def _repetition(args: argparse.Namespace, prep: Any, params: TrainParams) -> dict[str, Any]:
    """One simulate run and one task on chain on the same settings, back to back: the ratio is paired within it."""
    report, wall, sim_report, workdir, extra = _task(args, prep, full=True)
    same = Model.from_json_dict(report["model"]).trees == extra["sim_model"].trees
    metric = "test_error" if params.objective == "binary" else "test_rmse"  # what the reports hold for the loss
    sim_seconds = sim_report["train_seconds"] + sim_report["prep_seconds"]
    on_clock, loading, cpu = extra["on_clock"], extra["loading"], extra["cpu"]
    cores = default_threads()  # the cores this process may run on, as simulate's party threads count them
    return {
        "chain_wall_seconds": wall,
        "simulate_train_seconds": sim_report["train_seconds"],
        "simulate_prep_seconds": sim_report["prep_seconds"],
        "ratio": wall / sim_seconds,
        "party_load_seconds": loading,
        "load_on_clock": on_clock,
        "ratio_with_load": (wall + (0.0 if on_clock else loading)) / sim_seconds,
        **{k: report[k] for k in USAGE_FIELDS},
        f"{metric}_chain": report[metric],
        f"{metric}_simulate": sim_report[metric],
        "metric": metric,
        "models_identical": same,
        "party_time_split": [_time_split(p) for p in sorted(workdir.glob("party-*.log"))],
        "level_rounds": _level_rounds(workdir, cpu["anvil"]),
        "cpu_seconds": cpu,
        "cores": cores,
        "cpu_floor_seconds": sum(cpu.values()) / cores,
    }


def _task(args: argparse.Namespace, prep: Any, full: bool = False) -> Any:
    """simulate on the settings, then the task on a fresh anvil (whole, or for ``--budget`` seconds): the chain's
    report, its wall time, simulate's report and the parties' folder; with ``full``, also simulate's model, whether
    the loading was on the clock, its seconds and the CPU each side used."""
    sim_report, sim_model, _ = run(prep, args.algo)
    assert sim_model is not None
    # pruned: a long task's historical states would fill the disk
    anvil = start_anvil(keep_states=256, block_time=args.block_time)
    workdir = Path(tempfile.mkdtemp(prefix="fgbdt-bench-chain-"))
    # the parties' host loads a node while the contract is deployed, as `fgbdt train` has it load while the data is
    # read; the clock starts once it has loaded, as simulate's starts after its imports and compiled kernels. --cold:
    # it starts on the clock, as a cold start pays it
    on_clock = args.cold or not fork_available()  # fresh interpreters load on the clock too
    forks = None if on_clock else PartyForks(workdir / "fork-server.log")
    loading = 0.0
    try:
        client = ChainClient.connect(anvil.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        setup = ChainSetup(
            rpc=anvil.url,
            contract=contract,
            requester=requester,
            workdir=workdir,
            algo=args.algo,
            tick_seconds=args.tick,
            block_time=args.block_time,
            timeout_seconds=24 * 3600,
        )
        loading = forks.wait_loaded() if forks is not None else 0.0
        # the loading's CPU is the server's own and comes with the parties' when it is reaped: taken out below
        loading_cpu = _process_cpu(forks.process.pid) if forks is not None else 0.0
        start = time.perf_counter()
        before = _cpu()
        if args.cold and fork_available():
            forks = PartyForks(workdir / "fork-server.log")  # loads while the task is opened, on the clock
        if args.budget is None:
            report = run_task(prep, setup, forks=forks)
        else:
            report = _partial(prep, setup, args.budget, forks)
        wall = time.perf_counter() - start
        if args.cold and forks is not None and forks.loaded_at is not None:
            loading = forks.loaded_at - forks.started_at
        anvil_cpu = _process_cpu(anvil.process.pid)
    finally:
        if forks is not None:
            forks.close()  # closed by the task already, unless it failed before it started
        anvil.stop()
    after = _cpu()
    if not full:
        return report, wall, sim_report, workdir
    cpu = {
        "anvil": anvil_cpu,
        # every waited-for child (the party nodes and anvil), without a loading done before the clock
        "parties": after[1] - before[1] - anvil_cpu - loading_cpu,
        "requester": after[0] - before[0],
    }
    extra = {"sim_model": sim_model, "on_clock": on_clock, "loading": loading, "cpu": cpu}
    return report, wall, sim_report, workdir, extra


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its children that have been waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _process_cpu(pid: int) -> float:
    """CPU seconds a running process has used (``/proc/<pid>/stat``: utime + stime), 0 where /proc is absent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _partial(prep: Any, setup: ChainSetup, budget: float, forks: PartyForks | None) -> dict[str, Any]:
    """Run the task for ``budget`` seconds of training; the progress and counts at that point."""
    req = Requester(prep, setup, forks=forks)
    try:
        req.open_task()
        with BlockClock(req.client, setup.clock_tick):
            req.launch_parties()
            req.approve_and_start()
            started = time.perf_counter()
            first_block = req.client.block_number
            while time.perf_counter() - started < budget:
                st = req.task.state(req.task_id)
                if st.status != Status.TRAINING:
                    break
                time.sleep(1.0)
            st = req.task.state(req.task_id)
            training = time.perf_counter() - started
    finally:
        req.stop_parties()
    req.usage.scan(req.client, req.client.block_number)
    done = st.tree + (1 if st.status == Status.COMPLETED else 0)
    depth = prep.params.depth
    return {
        "trees_done": done,
        "trees_equivalent": done if st.status == Status.COMPLETED else st.tree + st.level / depth,
        "tree": st.tree,
        "level": st.level,
        "training_seconds": training,
        "first_training_block": first_block,
        **{k: v for k, v in req.usage.report(req.client).items() if k in USAGE_FIELDS},
    }


def _report_partial(
    args: argparse.Namespace,
    record: Run,
    report: dict[str, Any],
    wall: float,
    sim_report: dict[str, Any],
    workdir: Path,
) -> int:
    per_tree = report["training_seconds"] / max(report["trees_equivalent"], 1e-9)
    sim = sim_report["train_seconds"] + sim_report["prep_seconds"]
    extrapolated = per_tree * args.trees
    result = {
        "partial": True,
        **report,
        "wall_seconds_including_start": wall,
        "seconds_per_tree": per_tree,
        "extrapolated_training_seconds": extrapolated,
        "simulate_train_seconds": sim_report["train_seconds"],
        "simulate_prep_seconds": sim_report["prep_seconds"],
        "extrapolated_ratio": extrapolated / sim,
        "party_time_split": [_time_split(p) for p in sorted(workdir.glob("party-*.log"))],
    }
    record.save(result)
    print(
        f"partial run: {report['trees_done']} of {args.trees} trees (now at tree {report['tree']} level "
        f"{report['level']}) in {report['training_seconds']:.0f} s of training; {report['tx_count']} txs, "
        f"{report['gas_used'] / 1e9:.2f}G gas, {report['calldata_bytes'] / 1e6:.1f} MB calldata"
    )
    print(
        f"{per_tree:.1f} s per tree (levels done / depth) -> {args.trees} trees ~ {extrapolated:.0f} s "
        f"(extrapolated) vs simulate {sim:.1f} s: ~{result['extrapolated_ratio']:.0f}x"
    )
    return 0


def setting(parameters: dict[str, Any]) -> str:
    """A run's task in words: data, federation, shape and candidates."""
    p = parameters
    votes = f" (votes on {p['voted_trees']} trees)" if p["algo"] == "fvtree" else ""
    block = f", a block every {p['block_time']:g} s" if p.get("block_time") else ""
    shape = f"{p['trees']} trees depth {p['depth']}"
    return f"{p['data']} M={p['parties']} theta={p['theta']}, {shape}, {p['algo']}{votes}{block}"


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one setting: their repetitions pooled, mean ± standard error where there are
    several."""
    full = [rep for r in runs for rep in r["results"].get("repetitions", [])]
    partial = [r["results"] for r in runs if r["results"].get("partial")]
    lines: list[str] = []
    name = setting(runs[0]["parameters"])
    if full:
        metric = full[0]["metric"]

        def ms(key: str, fmt: str, scale: float = 1.0) -> str:
            mean, se = mean_se(r[key] * scale for r in full)
            return f"{mean:{fmt}} ± {se:{fmt}}" if len(full) > 1 else f"{mean:{fmt}}"

        loaded = [r["chain_wall_seconds"] + (0.0 if r["load_on_clock"] else r["party_load_seconds"]) for r in full]
        lines += [
            f"| setting | repetitions | chain wall s | with the parties' loading s | simulate s | ratio | with loading "
            f"| txs | blocks | gas | calldata MB | largest tx KB | largest tx gas | {metric.removeprefix('test_')} "
            "| models identical | CPU floor s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {name} | {len(full)} | {ms('chain_wall_seconds', '.1f')} "
            f"| {'{:.1f} ± {:.1f}'.format(*mean_se(loaded)) if len(full) > 1 else f'{loaded[0]:.1f}'} "
            f"| {'{:.2f}'.format(mean_se(r['simulate_train_seconds'] + r['simulate_prep_seconds'] for r in full)[0])} "
            f"| {ms('ratio', '.1f')}x | {ms('ratio_with_load', '.1f')}x "
            f"| {ms('tx_count', ',.0f')} | {ms('blocks', ',.0f')} | {ms('gas_used', '.2f', 1e-9)}G "
            f"| {ms('calldata_bytes', '.1f', 1e-6)} | {max(r['max_tx_bytes'] or 0 for r in full) / 1024:.0f} "
            f"| {max(r['max_tx_gas'] for r in full) / 1e6:.1f}M | {full[-1][f'{metric}_chain']:.4f} "
            f"| {sum(bool(r['models_identical']) for r in full)}/{len(full)} | {ms('cpu_floor_seconds', '.1f')} |",
        ]
        last = full[-1]
        cpu = last["cpu_seconds"]
        lines += [
            "",
            f"CPU in the last repetition: anvil {cpu['anvil']:.1f} s, the party processes {cpu['parties']:.1f} s, the "
            f"requester {cpu['requester']:.1f} s over {last['cores']} cores; the parties' host "
            + (
                f"loaded a node in {last['party_load_seconds']:.2f} s on the clock"
                if last["load_on_clock"]
                else f"loaded a node in {last['party_load_seconds']:.2f} s before the clock started"
            )
            + " (where each party's time went: `party_time_split` in the results).",
        ]
        if last.get("level_rounds"):
            lines += ["", sentence(last["level_rounds"])]
    for r in partial:
        lines += [
            *([""] if lines else []),
            f"Partial run ({name}): {r['trees_done']} trees (at tree {r['tree']} level {r['level']}) in "
            f"{r['training_seconds']:.0f} s of training; {r['tx_count']:,} txs, {r['gas_used'] / 1e9:.2f}G gas, "
            f"{r['calldata_bytes'] / 1e6:.1f} MB calldata; {r['seconds_per_tree']:.1f} s per tree, extrapolated "
            f"{r['extrapolated_training_seconds']:.0f} s, about {r['extrapolated_ratio']:.0f}x simulate.",
        ]
    return "\n".join(lines)


def _level_rounds(workdir: Path, anvil_cpu: float) -> dict[str, Any]:
    """The run's per-level figure against the floor of its dependent rounds (``bench.level_rounds``)."""
    return summary(level_rounds(party_moments(sorted(workdir.glob("party-*.log")))), anvil_cpu)


def _time_split(log: Path) -> str:
    found = re.findall(r"time split: (.*)", log.read_text())
    return found[-1] if found else "(no time split logged)"


if __name__ == "__main__":
    sys.exit(main())
