"""``fgbdt simulate`` end to end on a small generated CSV: report fields, model file, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.deploy.cli import main
from fgbdt_chain.node.model import Model


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
    model = Model.load(model_path)
    assert len(model.trees) == 8 and model.feature_names == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("algo", ["pvtree", "allfeatures", "standalone", "centralized"])
def test_simulate_every_algorithm(csv_file: Path, tmp_path: Path, algo: str) -> None:
    out = tmp_path / "r.json"
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
                "--trees",
                "4",
                "--depth",
                "2",
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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--theta", "1.5"], "--theta must be in [0, 1]"),
        (["--parties", "0"], "--parties must be at least 1"),
        (["--alpha", "2"], "alpha must be in (0, 1]"),
        (["--algo", "centralized", "--model", "m.json"], "--model needs a federated algorithm"),
    ],
)
def test_simulate_rejects_bad_options(
    csv_file: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["simulate", "--data", str(csv_file), "--trees", "2", "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err


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
    ("flags", "message"),
    [
        (["--greedy", "3"], "--greedy must be a party index in [0, 3)"),
        (["--greedy", "0", "--inflate", "0"], "positive number"),
        (["--refusal-rate", "1.5"], "--refusal-rate must be in (0, 1)"),
    ],
)
def test_simulate_refuses_bad_attack_and_rate_flags(
    csv_file: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_small(csv_file, *flags)) == 2
    assert message in capsys.readouterr().err
