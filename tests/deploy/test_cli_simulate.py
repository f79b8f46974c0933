"""``fgbdt simulate`` end to end on a small generated CSV: report fields, model file, and bad input."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.record import runs_of
from fgbdt_chain.deploy.cli import main
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.data import IDENTITY_KINDS
from fgbdt_chain.node.baselines.seed_systems import SEED_ALGORITHMS
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.protocol.shapley_cost import SHAPLEY_COST, SLOW_SHAPLEY_SECONDS, shapley_seconds
from fgbdt_chain.node.sim.fvtree import Federation


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1200, 5))
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=1200) > 0).astype(int)
    path = tmp_path_factory.mktemp("data") / "toy.csv"
    lines = ["label,a,b,c,d,e"]
    for yi, row in zip(y, X, strict=True):
        cells = ["" if rng.random() < 0.02 else f"{v:.5f}" for v in row]  # a few missing values
        lines.append(",".join([str(yi), *cells]))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_simulate_writes_report_and_model(csv_file: Path, tmp_path: Path) -> None:
    out, model_path = tmp_path / "r.json", tmp_path / "m.json"
    code = main(
        [
            "simulate",
            "--data",
            str(csv_file),
            "--parties",
            "3",
            "--theta",
            "0.8",
            "--trees",
            "8",
            "--depth",
            "3",
            "--bins",
            "8",
            "--min-rows",
            "5",
            "--quiet",
            "--json",
            str(out),
            "--model",
            str(model_path),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    for key in (
        "algo",
        "dataset",
        "parties",
        "theta",
        "trees",
        "depth",
        "bins",
        "seed",
        "params",
        "test_error",
        "test_auc",
        "train_seconds",
        "per_party",
        "contributions",
        "comm_bytes_per_party",
    ):
        assert key in report, key
    assert report["algo"] == "fvtree" and report["parties"] == 3 and report["test_rows"] == 300
    assert [p["party"] for p in report["per_party"]] == [0, 1, 2]
    assert sum(p["rows"] for p in report["per_party"]) == 900
    assert all("standalone_test_error" in p for p in report["per_party"])
    shares = [c["share"] for c in report["contributions"]]
    assert sum(shares) == pytest.approx(1.0)
    totals = [int(c["total_fixed"]) for c in report["contributions"]]
    assert [c["total"] for c in report["contributions"]] == [t / 10**18 for t in totals]
    assert 0 <= report["test_error"] < 0.3 and report["centralized"]["test_error"] < 0.3
    # LightGBM binning the raw values itself, next to the same-bins baseline: the private bins' cost stays visible
    assert set(report["lightgbm"]) == {"test_error", "test_auc", "train_seconds"}
    assert report["lightgbm"]["test_error"] < 0.3
    # and LightGBM as a user runs it, none of the task's parameters matched
    assert set(report["lightgbm_defaults"]) == {"test_error", "test_auc", "train_seconds"}
    assert report["lightgbm_defaults"]["test_error"] < 0.3
    assert report["params"]["binning"] == "dp" and report["params"]["binning_resolution"] == 64
    assert all(0 < b < 5 * 1024 for b in report["setup_bytes_per_party"])  # 5 features' sketch and the PSD
    model = Model.load(model_path)
    assert len(model.trees) == 8 and model.feature_names == ["a", "b", "c", "d", "e"]


def test_summary_shows_both_centralized_baselines(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same-bins baseline and LightGBM with its own bins are both rows of the summary, named apart."""
    args = ["simulate", "--data", str(csv_file), "--parties", "2", "--trees", "3", "--depth", "2", "--quiet"]
    assert main(args) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "centralized (task's" in table and "lightgbm (own" in table


@pytest.mark.parametrize(
    "algo",
    [
        "pvtree",
        "allfeatures",
        "drawn",
        "randomsplit",
        *SEED_ALGORITHMS,
        "standalone",
        "centralized",
        "lightgbm",
        "lightgbm-defaults",
    ],
)
def test_simulate_every_algorithm(csv_file: Path, tmp_path: Path, algo: str) -> None:
    out = tmp_path / "r.json"
    shape = [] if algo == "lightgbm-defaults" else ["--trees", "4", "--depth", "2"]  # it takes no shape
    assert (
        main(
            [
                "simulate",
                "--data",
                str(csv_file),
                "--algo",
                algo,
                "--parties",
                "2",
                *shape,
                "--quiet",
                "--no-baselines",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert report["algo"] == algo and 0 <= report["test_error"] <= 1
    if algo == "lightgbm-defaults":  # the report gives what it trained, not the task's shape
        assert (report["trees"], report["depth"]) == (100, None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--theta", "1.5"], "--theta must be in [0, 1]"),
        (["--parties", "0"], "--parties must be at least 1"),
        (["--alpha", "2"], "alpha must be in (0, 1]"),
        (["--algo", "centralized", "--model", "m.json"], "--model needs a federated algorithm"),
        (["--algo", "federboost", "--model", "m.json"], "--model needs trees on the task's bins"),
        (["--algo", "simfl", "--epsilon", "1"], "simfl has no differential privacy"),
        (["--algo", "fedxgbllr", "--parties", "3"], "fedxgbllr shares the 2 trees among 3 clients"),
        (["--algo", "lightgbm-defaults"], "trains LightGBM's own 100 rounds of 31 leaves; drop --trees/--depth"),
    ],
)
def test_simulate_rejects_bad_options(
    csv_file: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["simulate", "--data", str(csv_file), "--trees", "2", "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err


def test_seed_systems_run_on_one_party_and_refuse_what_they_cannot_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One party: every seed system trains (nothing to aggregate or match); one feature: SimFL says why not."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    rows = "\n".join(f"{int(a + rng.normal() > 0)},{a:.4f},{b:.4f}" for a, b in x)
    data = tmp_path / "two.csv"
    data.write_text(rows + "\n")
    for algo in SEED_ALGORITHMS:
        args = ["simulate", "--data", str(data), "--algo", algo, "--parties", "1", "--trees", "3", "--depth", "2"]
        assert main([*args, "--quiet", "--no-baselines"]) == 0
    one = tmp_path / "one.csv"
    one.write_text("\n".join(f"{int(a > 0)},{a:.4f}" for a, _ in x) + "\n")
    assert main(["simulate", "--data", str(one), "--algo", "simfl", "--trees", "2", "--quiet"]) == 2
    assert "at least 2 features; the data has 1" in capsys.readouterr().err


def test_simulate_reports_malformed_data_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("1,0.5,0.25\n0,0.1,oops\n1,0.3,0.2\n")
    assert main(["simulate", "--data", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and ":2" in err and "oops" in err


def test_simulate_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--data", str(tmp_path / "nope.csv"), "--quiet"]) == 2
    assert "nope.csv" in capsys.readouterr().err


def test_simulate_records_the_tie_rule(csv_file: Path, tmp_path: Path) -> None:
    """``--tie-break`` reaches the trainer and the report; the default is the hashed rule."""
    rules = {}
    for flag in ([], ["--tie-break", "index"]):
        out = tmp_path / f"r{len(flag)}.json"
        args = ["simulate", "--data", str(csv_file), "--parties", "4", "--trees", "3", "--depth", "3", "--quiet"]
        assert main([*args, "--no-baselines", "--json", str(out), *flag]) == 0
        report = json.loads(out.read_text())
        rules[report["params"]["tie_break"]] = report["test_error"]
    assert set(rules) == {"hashed", "index"}
    with pytest.raises(SystemExit):  # argparse rejects an unknown rule by name
        main(["simulate", "--data", str(csv_file), "--tie-break", "lowest"])


def _small(csv_file: Path, *extra: str) -> list[str]:
    return ["simulate", "--data", str(csv_file), "--parties", "3", "--trees", "4", "--depth", "3", "--bins", "8",
            "--min-rows", "5", "--psd-max-rows", "40", "--quiet", "--no-baselines", *extra]  # fmt: skip


def test_simulate_plays_an_attack_and_reports_the_refusal(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    flags = ["--greedy", "1", "--attack", "counts", "--inflate", "2", "--attack-from-tree", "1", "--json", str(out)]
    assert main(_small(csv_file, *flags)) == 0
    report = json.loads(out.read_text())
    [refusal] = report["endorsement"]["refusals"]
    assert (refusal["party"], refusal["tree"]) == (1, 1)
    assert "rows" in refusal["reason"]
    assert report["endorsement"]["attacks"] == {"1": {"kind": "counts", "factor": 2.0}}
    assert f"party 1 out from tree 1 level {refusal['level']}" in capsys.readouterr().out
    # without endorsement modelled, the same attack goes through (the simulator's all-honest reading)
    assert main(_small(csv_file, *flags, "--endorse", "none")) == 0
    assert json.loads(out.read_text())["endorsement"]["refusals"] == []


@pytest.mark.parametrize(
    ("kind", "parties", "holder_rows"),
    [("duplicate", 3, 2), ("fitted", 3, 2), ("split", 4, 1), ("clone", 4, 2), ("fresh-clone", 4, 2)],
)
def test_simulate_plays_a_data_attack_and_reports_the_holders_combined_share(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, parties: int, holder_rows: int
) -> None:
    out, honest = tmp_path / "r.json", tmp_path / "h.json"
    assert main(_small(csv_file, "--json", str(honest))) == 0
    assert main(_small(csv_file, "--greedy", "1", "--attack", kind, "--inflate", "2", "--json", str(out))) == 0
    report, before = json.loads(out.read_text()), json.loads(honest.read_text())
    assert report["parties"] == parties
    manipulated = report["manipulation"]
    assert manipulated["identities"] == ([1, 3] if kind in IDENTITY_KINDS else [1])
    shares = {c["party"]: c["share"] for c in report["contributions"]}
    assert manipulated["holder_share"] == pytest.approx(sum(shares[i] for i in manipulated["identities"]))
    rows = {pp["party"]: pp["rows"] for pp in report["per_party"]}
    assert sum(rows[i] for i in manipulated["identities"]) == holder_rows * before["per_party"][1]["rows"]
    assert rows[0] == before["per_party"][0]["rows"]
    assert report["endorsement"]["refusals"] == []  # consistent rows: nothing for the histogram rules to catch
    assert "combined share" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--greedy", "3"], "--greedy must be a party index in [0, 3)"),
        (["--greedy", "0", "--attack", "duplicate", "--inflate", "0.5"], "factor must be a number >= 1"),
        (["--greedy", "0", "--attack", "split", "--attack-from-tree", "1"], "--attack-from-tree is for histogram"),
        (["--greedy", "1", "--attack", "clone", "--inflate", "70"], "the holder's 70 identities make 72 parties"),
        (["--greedy", "0", "--inflate", "0"], "positive number"),
        (["--refusal-rate", "1.5"], "--refusal-rate must be in (0, 1)"),
        (["--tree-features", "one"], "--tree-features is for --algo randomsplit"),
        (["--dp-colluders", "1", "--epsilon", "1", "--algo", "fvtree"], "--dp-colluders is for --algo randomsplit"),
        (["--dp-colluders", "1", "--algo", "randomsplit"], "--dp-colluders is for --algo randomsplit with --epsilon"),
        (["--dp-colluders", "3", "--algo", "randomsplit", "--epsilon", "1"], "from 1 to parties - 1 = 2, got 3"),
        (["--dp-colluders", "0", "--algo", "randomsplit", "--epsilon", "1"], "every party knows its own noise"),
        (["--epsilon", "0.0001", "--trees", "1000"], "needs noise beyond 10000 times a row's effect on every leaf"),
        (["--epsilon", "0.001", "--algo", "fvtree"], "leaves nothing for training after the sketch and the PSD"),
    ],
)
def test_simulate_refuses_bad_attack_and_rate_flags(
    csv_file: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_small(csv_file, *flags)) == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------------------------- party count and Shapley cost


def test_a_shapley_seed_outside_uint256_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "never-read.csv")
    assert main(["simulate", "--data", missing, "--parties", "20", "--shapley-seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--shapley-seed must be a uint256, got -1" in err
    assert "never-read" not in err


def test_more_parties_than_the_contract_accepts_are_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the data file does not exist: the refusal must come before it is read (M = 200 used to grow to 23 GB)
    missing = str(tmp_path / "never-read.csv")
    assert main(["simulate", "--data", missing, "--parties", str(ref.MAX_PARTIES + 1)]) == 2
    err = capsys.readouterr().err
    assert f"--parties {ref.MAX_PARTIES + 1}: a federated task accepts at most {ref.MAX_PARTIES} parties" in err
    assert "never-read" not in err
    # the LightGBM baselines compute no Shapley values: any M, so here the missing file is what stops it
    assert main(["simulate", "--data", missing, "--parties", "40", "--algo", "standalone"]) == 2
    assert "never-read.csv" in capsys.readouterr().err
    # and the simulator itself refuses, for callers that do not go through the command line
    slots = [np.zeros((2, 1), dtype=np.int32)] * (ref.MAX_PARTIES + 1)
    with pytest.raises(ValueError, match=f"at most {ref.MAX_PARTIES} parties"):
        Federation(slots, [np.zeros(2)] * len(slots), TrainParams(), algo="pvtree")


def test_shapley_cost_estimate_follows_the_fitted_model() -> None:
    a, b = SHAPLEY_COST
    top = EXACT_MAX_PARTIES
    assert shapley_seconds(top, 500, 8) == pytest.approx(500 * 255 * (a + top * b) * 2**top)
    per_split = [shapley_seconds(m, 1, 1) for m in range(2, top + 1)]
    assert all(1.9 < later / earlier < 2.3 for earlier, later in itertools.pairwise(per_split))  # ~2^M
    assert shapley_seconds(4, 500, 8) < SLOW_SHAPLEY_SECONDS < shapley_seconds(top, 500, 8)
    # the estimate is the benchmark's fit (bench/shapley_cost.py), within the noise of a rerun, over the M it was fitted
    # on: a rerun splits the time between a and b differently (the per-party term is small), not the time per split
    run = runs_of("shapley_cost")[-1]
    fitted = run["results"]["fit"]["compiled"]  # node.shapley_kernel, what simulate runs
    for m in range(run["parameters"]["fit_from"], min(run["parameters"]["max_parties"], top) + 1):
        assert shapley_seconds(m, 1, 1) == pytest.approx((fitted["a"] + fitted["b"] * m) * 2**m, rel=0.25), m


def test_slow_shapley_is_announced_before_the_data_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "never-read.csv")
    top = str(EXACT_MAX_PARTIES)
    assert main(["simulate", "--data", missing, "--parties", top, "--trees", "500", "--depth", "8"]) == 2
    warning, error = capsys.readouterr().err.strip().splitlines()
    seconds = shapley_seconds(EXACT_MAX_PARTIES, 500, 8)
    assert warning.startswith(f"fgbdt simulate: warning: exact split Shapley for {top} parties")
    assert f"127,500 splits: up to about {seconds:,.0f} s ({seconds / 60:.0f} min)" in warning  # minutes
    assert "never-read.csv" in error  # the warning came first, and nothing else ran before it
    assert main(["simulate", "--data", missing, "--parties", "4", "--trees", "500", "--depth", "8"]) == 2
    assert "warning" not in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ data hygiene


def test_one_class_labels_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.csv"
    one.write_text("label,a\n" + "".join(f"1,{k}\n" for k in range(40)))
    for task in ("auto", "binary"):
        assert main(["simulate", "--data", str(one), "--task", task, "--quiet"]) == 2
        assert "one.csv: every label is 1" in capsys.readouterr().err


def test_a_pandas_index_column_is_dropped_with_a_warning(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = csv_file.read_text().splitlines()
    indexed = tmp_path / "indexed.csv"
    indexed.write_text("\n".join([f",{lines[0]}", *(f"{k},{line}" for k, line in enumerate(lines[1:]))]) + "\n")
    model_path = tmp_path / "m.json"
    assert main(_small(indexed, "--model", str(model_path))) == 0
    err = capsys.readouterr().err
    assert err.count("warning: indexed.csv: dropped column 0 ('' in the header, values 0, 1, ...)") == 1
    assert Model.load(model_path).feature_names == ["a", "b", "c", "d", "e"]


def test_task_regression_is_kept_on_0_1_labels(csv_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(_small(csv_file, "--task", "regression", "--json", str(out))) == 0
    assert json.loads(out.read_text())["params"]["objective"] == "regression"


@pytest.mark.parametrize(("algo", "trees", "depth"), [("randomsplit", 200, 4), ("fvtree", 100, 6)])
def test_trees_and_depth_left_unset_take_the_algorithms_defaults(
    csv_file: Path, tmp_path: Path, algo: str, trees: int, depth: int
) -> None:
    """Unset, the trees and depth are the algorithm's own (random-split trees take fewer leaves, each less
    drowned by its noise); given, the user's. The FV-tree run is only parsed."""
    from fgbdt_chain.deploy.cli import build_parser
    from fgbdt_chain.deploy.cmd_simulate import shape_defaults

    args = build_parser().parse_args(["simulate", "--data", str(csv_file), "--algo", algo])
    shape_defaults(args)
    assert (args.trees, args.depth) == (trees, depth)
    given = build_parser().parse_args(["simulate", "--data", str(csv_file), "--algo", algo, "--trees", "3"])
    shape_defaults(given)
    assert (given.trees, given.depth) == (3, depth)
    if algo == "randomsplit":
        out = tmp_path / "r.json"
        flags = ["--data", str(csv_file), "--algo", algo, "--parties", "3", "--quiet", "--no-baselines"]
        assert main(["simulate", *flags, "--json", str(out)]) == 0
        report = json.loads(out.read_text())
        assert (report["trees"], report["depth"]) == (trees, depth)


def test_private_random_splits_report_the_coalition_they_hold_against(csv_file: Path, tmp_path: Path) -> None:
    """The report names how many colluding parties the guarantee holds against, the default's and the user's, and
    what is left if all the others pool; with every other party the noise is each party's own (the sum's sd is
    sqrt(M) times a party's)."""
    out = tmp_path / "r.json"
    flags = ["--algo", "randomsplit", "--epsilon", "1", "--json", str(out)]
    assert main(_small(csv_file, *flags)) == 0
    default = json.loads(out.read_text())["privacy"]
    assert (default["parties"], default["colluders"]) == (3, 1)
    assert default["accounted_epsilon"] <= 1.0 < default["all_others_epsilon"]
    assert "any 1 other parties" in default["guarantee"]
    assert main(_small(csv_file, *flags, "--dp-colluders", "2")) == 0
    alone = json.loads(out.read_text())["privacy"]
    assert alone["colluders"] == 2 and alone["all_others_epsilon"] == alone["accounted_epsilon"] <= 1.0
    assert alone["leaf_noise_sd"]["g"] == pytest.approx(default["leaf_noise_sd"]["g"] * math.sqrt(2))
    assert alone["sum_noise_sd"]["g"] == pytest.approx(alone["leaf_noise_sd"]["g"] * math.sqrt(3))
    # the summary's line under the table says the same
    from fgbdt_chain.deploy.cmd_simulate import privacy_line

    line = str(privacy_line(default, 3))
    assert "against any 1 of the 2 other parties pooling their views (if all 2 pool: epsilon" in line
    # the conditions: neighbouring relation, the aggregator, dropout, the schema's source, the noise's source
    assert "one row of the party added or removed" in line and "(2, " in line
    assert "against the aggregator epsilon 1" in line and "recovered from a majority of the others' shares" in line
    assert "ranges and integer flags: requester's rows" in line
    assert "its own noise carries it, against all 2 other parties" in str(privacy_line(alone, 3))
    assert privacy_line({"epsilon": math.inf}, 3) is None
    # entropy by default under a budget; seeds only when asked for, and then the line names the experiment
    assert default["noise"] == "entropy" and "seeded" not in line and "entropy" in line
    assert main(_small(csv_file, *flags, "--dp-noise", "seeded")) == 0
    seeded = json.loads(out.read_text())["privacy"]
    assert seeded["noise"] == "seeded" and "seeded by --seed (experiment)" in str(privacy_line(seeded, 3))


def test_a_budget_without_an_algorithm_trains_the_private_model(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--epsilon`` alone trains random splits at their own shape and says so; naming FV-tree keeps it, and
    without a budget FV-tree is the default (node.experiment.default_algorithm)."""
    out = tmp_path / "r.json"
    base = ["simulate", "--data", str(csv_file), "--parties", "3", "--quiet", "--no-baselines", "--json", str(out)]
    assert main([*base, "--epsilon", "1"]) == 0
    report = json.loads(out.read_text())
    assert (report["algo"], report["trees"], report["depth"]) == ("randomsplit", 200, 4)
    assert report["privacy"]["accounted_epsilon"] <= 1.0
    assert "with --epsilon and no --algo, simulate trains random-split trees" in capsys.readouterr().err
    assert main([*base, "--epsilon", "1", "--algo", "fvtree", "--trees", "2", "--depth", "2"]) == 0
    assert json.loads(out.read_text())["algo"] == "fvtree"
    assert "no --algo" not in capsys.readouterr().err
    assert main([*base, "--trees", "2", "--depth", "2"]) == 0
    assert json.loads(out.read_text())["algo"] == "fvtree"


@pytest.mark.parametrize(
    "flags, reason",
    [
        ([], "needs its label range declared: set --label-min and --label-max"),
        (["--label-min", "-40", "--label-max", "40", "--algo", "fvtree"], "a privacy budget (epsilon) needs a binary"),
        (["--label-min", "-40"], "--label-min and --label-max declare the label range together; give both"),
        (
            ["--label-min", "40", "--label-max", "-40"],
            "--label-min/--label-max: the label range (label_min, label_max)",
        ),
    ],
)
def test_a_private_regression_task_is_refused_with_its_reason(
    tmp_path: Path, flags: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "reg.csv"
    data.write_text("\n".join(",".join(f"{v:.4f}" for v in r) for r in _regression_rows()) + "\n")
    assert main(["simulate", "--data", str(data), "--epsilon", "1", "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err


def _regression_rows() -> np.ndarray:
    """Label (first column) about 10 times a standard normal, and two features."""
    rng = np.random.default_rng(0)
    return np.column_stack([rng.normal(size=60) * 10, rng.normal(size=(60, 2))])


def test_a_private_regression_task_trains_from_the_declared_label_range(tmp_path: Path) -> None:
    """``--label-min``/``--label-max``: every score starts at the range's midpoint (one tree at a negligible
    learning rate predicts it everywhere) and the gradients' bound is half its width."""
    data, out, model_path = tmp_path / "reg.csv", tmp_path / "r.json", tmp_path / "m.json"
    data.write_text("\n".join(",".join(f"{v:.4f}" for v in r) for r in _regression_rows()) + "\n")
    flags = ["--epsilon", "1", "--label-min", "10", "--label-max", "50", "--trees", "1", "--lr", "1e-9"]
    base = ["simulate", "--data", str(data), "--parties", "2", "--quiet", "--no-baselines", "--dp-noise", "seeded"]
    assert main([*base, *flags, "--json", str(out), "--model", str(model_path)]) == 0
    privacy = json.loads(out.read_text())["privacy"]
    assert privacy["gradient_bound"] == 20.0 and privacy["accounted_epsilon"] <= 1.0
    predictions = Model.load(model_path).predict(_regression_rows()[:, 1:])
    assert np.allclose(predictions, 30.0, atol=1e-3)


def test_random_splits_refuse_data_without_an_edge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "flat.csv"
    data.write_text("y,const\n" + "".join(f"{i % 2},1\n" for i in range(200)))
    assert main(["simulate", "--data", str(data), "--epsilon", "1", "--quiet", "--no-baselines"]) == 2
    err = capsys.readouterr().err
    assert "no feature has two bins: random splits need at least one feature with an edge" in err
    assert "Traceback" not in err


def test_a_private_fvtree_task_says_how_often_each_party_releases(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_small(csv_file, "--algo", "fvtree", "--epsilon", "1")) == 0
    err = capsys.readouterr().err
    assert "each party releases its histograms 12 times (4 trees x 3 levels)" in err
    assert "--algo randomsplit releases once per tree" in err
    assert main(_small(csv_file)) == 0
    assert "releases its histograms" not in capsys.readouterr().err  # no budget, no note


def test_a_private_task_on_chain_says_what_it_releases_before_any_transaction(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fgbdt train --epsilon`` runs FV-tree's per-level releases (random splits do not run on chain): the note
    comes before the chain is even reached (here nothing answers at the address)."""
    flags = ["--parties", "3", "--trees", "2", "--depth", "2", "--epsilon", "1", "--quiet"]
    chain = ["--rpc", "http://127.0.0.1:9", "--contract", "0x" + "00" * 20]
    assert main(["train", "--data", str(csv_file), *flags, *chain]) == 2
    err = capsys.readouterr().err
    assert "fgbdt train: note: each party releases its histograms 4 times (2 trees x 2 levels)" in err
    assert "random splits, which release once per tree, run in simulate and the Python API only" in err
    assert "does not answer" in err


def test_a_task_whose_node_cannot_resolve_in_a_transaction_is_refused_before_the_chain(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fgbdt train`` with more parties than a node's resolution carries in one transaction at these bins stops
    before the chain is reached (nothing answers at the address), naming what fits."""
    flags = ["--parties", "40", "--bins", "16", "--trees", "2", "--depth", "8", "--quiet"]
    chain = ["--rpc", "http://127.0.0.1:9", "--contract", "0x" + "00" * 20]
    assert main(["train", "--data", str(csv_file), *flags, *chain]) == 2
    err = capsys.readouterr().err
    assert "over the 129,024 a transaction may carry" in err and "at most 36 parties at 16 bins" in err
    assert "does not answer" not in err


def test_a_private_regression_task_on_chain_is_refused_before_the_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On chain every task trains FV-tree, whose noise assumes the logistic loss's bounded gradients: a budget on a
    regression task is refused before the chain is reached (nothing answers at the address), declared range or not,
    and the refusal says where private regression runs."""
    data = tmp_path / "reg.csv"
    data.write_text("y,a,b\n" + "".join(f"{(i * 7) % 23 + 0.5},{i % 11},{(i * 3) % 5}\n" for i in range(120)))
    flags = ["--parties", "3", "--trees", "2", "--depth", "2", "--epsilon", "1", "--quiet"]
    chain = ["--rpc", "http://127.0.0.1:9", "--contract", "0x" + "00" * 20]
    for declared in ([], ["--label-min", "0", "--label-max", "24"]):
        assert main(["train", "--data", str(data), *flags, *declared, *chain]) == 2
        err = capsys.readouterr().err
        assert "a privacy budget (epsilon) needs a binary task" in err
        assert "private regression runs in fgbdt simulate with --label-min and --label-max" in err
        assert "does not answer" not in err
