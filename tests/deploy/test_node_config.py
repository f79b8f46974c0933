"""``fgbdt node --config FILE``: a party's options from a TOML file, the command line winning; and the endpoint's
transport, HTTPS from a certificate or plain HTTP only when asked for."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fgbdt_chain.deploy.cli import UserError, build_parser
from fgbdt_chain.deploy.cmd_node import DEFAULT_LISTEN, _tls, apply_config
from fgbdt_chain.node.protocol.parquet_party import ParquetParty


def _args(*argv: str) -> argparse.Namespace:
    return build_parser("node").parse_args(["node", *argv])


def test_a_config_file_fills_what_the_command_line_leaves(tmp_path: Path) -> None:
    folder = tmp_path / "bank"
    folder.mkdir()
    config = folder / "node.toml"
    config.write_text(
        "task = 3\n"
        'key = "party.key"\n'
        'data = "/srv/rows.csv"\n'
        'listen = "10.0.0.2:9000"\n'
        'public-url = "https://bank.example:9000"\n'
        'rpc = "http://10.0.0.1:8545"\n'
        'contract = "0x' + "11" * 20 + '"\n'
        'tls-cert = "tls/cert.pem"\n'
        'tls-key = "tls/key.pem"\n'
        'tls-ca = "tls/ca.pem"\n'
    )
    args = _args("--config", str(config), "--task", "5")
    apply_config(args)
    a = vars(args)
    assert a["task"] == 5  # the command line wins
    assert a["key"] == str(folder / "party.key") and a["data"] == "/srv/rows.csv"  # relative to the file
    assert a["listen"] == "10.0.0.2:9000" and a["public_url"] == "https://bank.example:9000"
    assert a["rpc"] == "http://10.0.0.1:8545" and a["contract"] == "0x" + "11" * 20
    assert (a["tls_cert"], a["tls_key"], a["tls_ca"]) == tuple(
        str(folder / "tls" / f) for f in ("cert.pem", "key.pem", "ca.pem")
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('task = 1\nkey = "k"\ndata = "d"\nport = 9000\n', "not options of fgbdt node: port"),
        ('task = "one"\nkey = "k"\ndata = "d"\n', "task must be a int"),
        ("task = 1\n", "required (here or in --config): --key, --data"),
        ("task = [1\n", "--config"),
    ],
    ids=["unknown", "type", "missing", "not-toml"],
)
def test_a_config_file_that_cannot_be_used_says_why(tmp_path: Path, text: str, error: str) -> None:
    config = tmp_path / "node.toml"
    config.write_text(text)
    with pytest.raises(UserError, match=error.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        apply_config(_args("--config", str(config)))


def test_plain_http_only_when_asked_for_and_https_from_a_certificate(tmp_path: Path) -> None:
    args = _args("--task", "1", "--key", "k", "--data", "d")
    apply_config(args)
    assert args.listen == DEFAULT_LISTEN
    with pytest.raises(UserError, match="needs a certificate"):
        _tls(args)
    assert _tls(_args("--plain-http")) is None
    with pytest.raises(UserError, match="go together"):
        _tls(_args("--tls-cert", "c.pem"))
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("-")
    key.write_text("-")
    assert _tls(_args("--tls-cert", str(cert), "--tls-key", str(key))) == (str(cert), str(key))
    with pytest.raises(UserError, match="choose one"):
        _tls(_args("--tls-cert", str(cert), "--tls-key", str(key), "--plain-http"))


def test_a_parquet_table_gives_the_party_s_rows_read_chunk_by_chunk(tmp_path: Path) -> None:
    folder = tmp_path / "bank"
    (folder / "rows").mkdir(parents=True)
    config = folder / "node.toml"
    config.write_text('task = 3\nkey = "party.key"\n[parquet]\nrows = "rows"\nslots = "/srv/slots"\nchunk_rows = 500\n')
    args = _args("--config", str(config))
    apply_config(args)
    assert args.data is None
    assert args.parquet == ParquetParty(folder / "rows", Path("/srv/slots"), chunk_rows=500)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[parquet]\nrows = "rows"\nslots = "s"\nchunks = 5\n', "unknown Parquet party setting(s) chunks"),
        ('[parquet]\nrows = "rows"\n', "a Parquet party needs 'slots'"),
        ('[parquet]\nrows = "rows"\nslots = "s"\nchunk_rows = 0\n', "chunk_rows must be at least 1"),
        ('[parquet]\nrows = "missing"\nslots = "s"\n', "no such file or folder"),
        ('[parquet]\nrows = 5\nslots = "s"\n', "rows must be a path"),
        ('parquet = "rows"\n', "parquet must be a table"),
        ('data = "d.csv"\n[parquet]\nrows = "rows"\nslots = "s"\n', "come from one of them"),
        ("", "--data (or a [parquet] table"),
    ],
    ids=["unknown", "no-slots", "chunk", "no-rows", "rows-type", "not-table", "both", "neither"],
)
def test_a_parquet_table_that_cannot_be_used_says_why(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "rows").mkdir()
    config = tmp_path / "node.toml"
    config.write_text('task = 1\nkey = "k"\n' + text)
    with pytest.raises(UserError, match=error.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        apply_config(_args("--config", str(config)))
