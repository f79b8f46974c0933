"""The deployment guide's configuration file for ``fgbdt node`` is what the command takes: its example parses and
fills the options, and the keys the guide lists are the command's. The guide's steps themselves run in
``tests/e2e/test_netns_federation.py``, whose parties are started from files with the example's keys."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from fgbdt_chain.deploy.cmd_node import FROM_CONFIG, apply_config, register
from tests.docs.doc_blocks import DEPLOYING, node_config_example, node_config_text


def test_the_guides_configuration_example_is_taken_by_fgbdt_node(tmp_path: Path) -> None:
    example = node_config_example()
    assert set(example) <= set(FROM_CONFIG)
    path = tmp_path / "bank-a.toml"
    path.write_text(node_config_text())
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["node", "--config", str(path)])
    apply_config(args)
    assert args.task == example["task"] and args.public_url == example["public-url"]
    assert args.tls_ca == str(tmp_path / "tls" / "federation-ca.pem")  # relative to the file's folder
    assert args.block_time == float(example["block-time"])  # type: ignore[arg-type]


def test_the_guide_lists_every_key_a_configuration_file_may_hold() -> None:
    text = " ".join(DEPLOYING.read_text().split())
    listed = re.search(r"Keys a configuration file may hold: (.*?); any other key is refused", text)
    assert listed is not None
    assert set(re.findall(r"`([\w-]+)`", listed.group(1))) == set(FROM_CONFIG)


def test_the_guides_parquet_table_is_taken_by_fgbdt_node(tmp_path: Path) -> None:
    m = re.search(
        r"\*\*Rows as a Parquet dataset\.\*\*.*?^```toml\n(?P<toml>.*?)^```$", DEPLOYING.read_text(), re.M | re.S
    )
    assert m is not None, "the guide shows no [parquet] table"
    path = tmp_path / "bank-a.toml"
    path.write_text('task = 1\nkey = "bank-a.key"\n' + m.group("toml"))
    (tmp_path / "bank-a-rows").mkdir()
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["node", "--config", str(path)])
    apply_config(args)
    assert args.data is None
    assert args.parquet.rows == tmp_path / "bank-a-rows" and args.parquet.slots == tmp_path / "bank-a-slots"
    assert args.parquet.chunk_rows == 262144
