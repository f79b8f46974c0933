"""Four organisations, each a party on its own host, over a network with latency, jitter, loss and TLS.

The hosts are Linux network namespaces on this machine, each joined to the test's namespace by a veth pair: the chain
(anvil mining a block every 2 s) in one, each party in its own, started by ``fgbdt node --config`` from its own TOML
file with its own certificate and the federation's CA: the steps of the deployment guide's "Joining a task from one's
own host" (``docs/deploying.md``), its configuration file's keys read from the page. Everything a party sends crosses
a userspace TCP proxy in the test's namespace (this kernel has no ``tc netem``): 20 ms each way (a 40 ms round trip)
with 5 ms of jitter, and 1% of the chunks delayed by a 200 ms retransmission timeout, which is what a lost segment
costs a TCP stream. The requester runs in the test's namespace. The task completes, the audit says OK, and the model
is the simulator's.

Traffic goes only to the namespaces the test creates (10.231.0.0/16) and to loopback."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from fgbdt_chain.deploy.party_forks import NODE_COMMAND
from fgbdt_chain.deploy.requester import BlockClock, ChainSetup, Requester
from fgbdt_chain.deploy.tcp_proxies import LossyProxies
from fgbdt_chain.ledger.audit.replay import audit_events, read_task
from fgbdt_chain.ledger.devnet.anvil import anvil_command, wait_until_ready
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.node.data.loaders import load_train_test
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run
from tests.docs.doc_blocks import node_config_example

PARTIES = 4
PARAMS = TrainParams(trees=2, depth=2, bins=8, min_rows=5)
CONFIG = PrepConfig(parties=PARTIES, theta=0.8, seed=0, psd_max_rows=40)
BLOCK_SECONDS = 2.0
ONE_WAY, JITTER, LOSS, RTO = 0.020, 0.005, 0.01, 0.200
RPC_PORT, ENDPOINT_PORT = 8545, 9443

pytestmark = [
    pytest.mark.slow,  # about two minutes: the task's 2 s blocks
    pytest.mark.chain,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces need root and iproute2"
    ),
]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _host(k: int) -> tuple[str, str]:
    """(the test's side, the host's side) of host ``k``'s veth pair: 0 the chain, 1..4 the parties."""
    return f"10.231.{k}.1", f"10.231.{k}.2"


@pytest.fixture
def namespaces() -> Iterator[list[str]]:
    """A namespace per host, each joined to this one by a veth pair and routed through it."""
    tag = f"fg{os.getpid() % 100000}"
    names = [f"{tag}h{k}" for k in range(PARTIES + 1)]
    try:
        for k, ns in enumerate(names):
            _ip("netns", "add", ns)
            here, there = _host(k)
            _ip("link", "add", f"{tag}a{k}", "type", "veth", "peer", "name", f"{tag}b{k}")
            _ip("link", "set", f"{tag}b{k}", "netns", ns)
            _ip("addr", "add", f"{here}/24", "dev", f"{tag}a{k}")
            _ip("link", "set", f"{tag}a{k}", "up")
            _ip("-n", ns, "addr", "add", f"{there}/24", "dev", f"{tag}b{k}")
            _ip("-n", ns, "link", "set", f"{tag}b{k}", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "route", "add", "default", "via", here)
        yield names
    finally:
        for k, ns in enumerate(names):
            subprocess.run(["ip", "link", "del", f"{tag}a{k}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _certificates(folder: Path, hosts: list[str]) -> tuple[Path, list[tuple[Path, Path]]]:
    """The federation's CA and, for each host address, a certificate it signed: (CA file, [(cert, key)])."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "federation CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = folder / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pairs = []
    for i, host in enumerate(hosts):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"party {i}")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        cert_file, key_file = folder / f"party-{i}.crt", folder / f"party-{i}.key.pem"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        pairs.append((cert_file, key_file))
    return ca_file, pairs


class NamespacedRequester(Requester):
    """The requester of ``deploy.requester``, whose parties each run ``fgbdt node --config`` in their namespace."""

    def __init__(self, *args: Any, namespaces: list[str], ca: Path, certs: list[tuple[Path, Path]], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.namespaces, self.ca, self.certs = namespaces, ca, certs

    def spawn(self, args: list[str], log_path: Path) -> Any:
        """``fgbdt node --config FILE`` in the party's namespace, the file holding what the deployment guide's
        example holds (``docs/deploying.md``), for this party's host."""
        moved = {
            "--task": "task",
            "--key": "key",
            "--data": "data",
            "--contract": "contract",
            "--block-time": "block-time",
        }
        config: dict[str, Any] = {}
        rest: list[str] = []
        i = int(args[args.index("--party-index") + 1])
        it = iter(args[1:])
        for a in it:
            if a in moved:
                config[moved[a]] = next(it)
            elif a in ("--rpc", "--listen"):
                next(it)
            elif a != "--plain-http":
                rest.append(a)
        edge, inside = _host(i + 1)
        config.update(
            task=int(config["task"]),
            **{"block-time": float(config["block-time"])},
            rpc=f"http://{edge}:{RPC_PORT}",
            listen=f"{inside}:{ENDPOINT_PORT}",
            **{"public-url": f"https://{edge}:{ENDPOINT_PORT}"},
            **{"tls-cert": str(self.certs[i][0]), "tls-key": str(self.certs[i][1]), "tls-ca": str(self.ca)},
        )
        assert set(config) == set(node_config_example()), "the guide's configuration and the test's differ"
        toml = log_path.with_suffix(".toml")
        toml.write_text("".join(f"{k} = {_toml(v)}\n" for k, v in config.items()))
        out = open(log_path, "ab")  # noqa: SIM115 - owned by the child process
        cmd = ["ip", "netns", "exec", self.namespaces[i + 1], sys.executable, *NODE_COMMAND, "node", "--config"]
        return subprocess.Popen([*cmd, str(toml), *rest], stdout=out, stderr=subprocess.STDOUT)


def _toml(value: Any) -> str:
    return repr(value) if isinstance(value, int | float) else '"' + str(value) + '"'


def test_four_organisations_train_over_a_lossy_network_with_tls(
    namespaces: list[str], toy_csv: Path, tmp_path: Path
) -> None:
    _, chain_inside = _host(0)
    cmd = anvil_command(RPC_PORT, block_time=BLOCK_SECONDS)
    cmd[cmd.index("--host") + 1] = chain_inside
    anvil = subprocess.Popen(["ip", "netns", "exec", namespaces[0], *cmd], stdout=subprocess.DEVNULL)
    proxy = LossyProxies(seed=1, one_way=ONE_WAY, jitter=JITTER, loss=LOSS, rto=RTO)
    url = f"http://{chain_inside}:{RPC_PORT}"
    try:
        wait_until_ready(anvil, url, "anvil", 30.0)
        for i in range(PARTIES):
            edge, inside = _host(i + 1)
            proxy.add((edge, RPC_PORT), (chain_inside, RPC_PORT))  # the party's way to the chain
            proxy.add((edge, ENDPOINT_PORT), (inside, ENDPOINT_PORT))  # the others' way to the party
        client = ChainClient.connect(url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        ca, certs = _certificates(tmp_path, [_host(i + 1)[0] for i in range(PARTIES)])
        train, test = load_train_test(toy_csv, seed=0)
        prep = prepare(train, test, PARAMS, CONFIG)
        setup = ChainSetup(
            rpc=url,
            contract=contract,
            requester=requester,
            workdir=tmp_path / "work",
            block_time=BLOCK_SECONDS,
            timeout_seconds=600,
        )
        started = time.monotonic()
        req = NamespacedRequester(prep, setup, namespaces=namespaces, ca=ca, certs=certs)
        try:
            req.open_task()
            with BlockClock(req.client, setup.clock_tick):
                req.launch_parties()
                req.approve_and_start()
                req.follow()
            codes = req.wait_parties()
        finally:
            req.stop_parties()
        elapsed = time.monotonic() - started
        report = req.report(elapsed)
        logs = "\n".join(p.read_text()[-3000:] for p in sorted((tmp_path / "work").glob("party-*.log")))
        assert codes == [0] * PARTIES, logs
        assert all(f"https://{_host(i + 1)[0]}:{ENDPOINT_PORT}" in logs for i in range(PARTIES))
        sim_report, sim_model, _ = run(prep, "fvtree")
        assert sim_model is not None
        chain = model_from_chain(TaskContract.at(client, contract), report["task"])
        assert chain.edges == sim_model.edges and chain.trees == sim_model.trees
        assert report["test_error"] == sim_report["test_error"]
        audit = audit_events(read_task(client, contract, report["task"]))
        assert audit.ok and audit.completed, audit.first_mismatch
        assert proxy.delayed > 0  # the loss was played
        print(f"four parties over the lossy network: {elapsed:.1f} s")
    finally:
        proxy.close()
        anvil.terminate()
        anvil.wait(10)
