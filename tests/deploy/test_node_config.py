"""``fgbdt node --config FILE``: a party's options from a TOML file, the command line winning; and the endpoint's
transport, HTTPS from a certificate or plain HTTP only when asked for."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fgbdt_chain.deploy.cli import UserError, build_parser
from fgbdt_chain.deploy.cmd_node import DEFAULT_LISTEN, _tls, apply_config


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
