"""Joining a task: its terms read from the chain and checked against this party's data, the join request (the
party's PSD and binning sketch, published), the wait for the requester's approval and the start, and the set-up of
training from what the start publishes (the bin edges, every party's PSD)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import EdgesFormatError
from fgbdt_chain.ledger.spec.task_params import TaskConfig, TaskParameters
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import ModelNotReady, task_edges
from fgbdt_chain.ledger.wrappers.contracts import Membership, Status, TaskContract
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.model.trees import EdgesLike, bin_matrix, slot_widths
from fgbdt_chain.node.party.relay import RELAY_TTL_SECONDS, RelayChannel, measured_block_seconds, relay_ttl
from fgbdt_chain.node.party.session import NodeError, NodeSettings, PartyData, PartySession
from fgbdt_chain.node.privacy.accountant import PrivacyPlan, plan, secret_noise_seed
from fgbdt_chain.node.privacy.binning import fixed_round, local_sketch, sketch_rng
from fgbdt_chain.node.privacy.psd import PSD, build_psd, label_levels_for, psd_budget, psd_rng
from fgbdt_chain.node.privacy.publish import decode_join, encode_join
from fgbdt_chain.node.privacy.weights import distribution_weights
from fgbdt_chain.node.protocol.endorsement import EndorsementRule, estimators_for
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.protocol.parquet_party import ParquetParty


@dataclass(frozen=True)
class TaskTerms:
    """A task's terms as this party trains it: the contract's config, the schema's feature and label ranges, the
    training parameters, the privacy plan and the verifiers' rule."""

    cfg: TaskConfig
    low: np.ndarray
    high: np.ndarray
    label_range: tuple[float, float]
    """The label's range in the task's schema: this party's PSD splits the label over it, as every other's."""
    params: TrainParams
    privacy: PrivacyPlan
    """The task's differential privacy for everything this party releases (``node.privacy.accountant``)."""
    rule: EndorsementRule


def _shape(data: PartyData) -> tuple[str, int, np.ndarray]:
    """This party's data's name, number of features and labels (a Parquet party's read from its dataset)."""
    if isinstance(data, ParquetParty):
        return str(data.rows), len(data.features()), data.labels()
    return data.name, data.n_features, data.y


def read_terms(task: TaskContract, task_id: int, data: PartyData, settings: NodeSettings) -> TaskTerms:
    """The task's terms from the chain (its config and ``TaskCreated``); ``NodeError`` where this party's data does
    not fit them (another number of features, labels outside the task's range or not 0/1 for a classifier), or
    where a Parquet party's rows cannot play them (``_chunked_refusal``)."""
    cfg = task.config(task_id)
    created = task.client.logs(task.contract, ["TaskCreated"], task_id)
    if not created:
        raise NodeError(f"task {task_id} does not exist on contract {task.address}")
    args = created[0].args
    feature_low = fixed_round(np.array([ref.from_fixed(int(v)) for v in args["featureMin"]]))
    feature_high = fixed_round(np.array([ref.from_fixed(int(v)) for v in args["featureMax"]]))
    name, n_features, y = _shape(data)
    if len(feature_low) != n_features:
        raise NodeError(f"task {task_id} has {len(feature_low)} features but {name} has {n_features}")
    task_params = TaskParameters.of(cfg)
    if task_params.objective == "binary" and not set(np.unique(y).tolist()) <= {0.0, 1.0}:
        raise NodeError("the task trains a binary classifier: labels must be 0/1")
    label_range = task_params.label_range()
    low, high = label_range
    outside = np.flatnonzero(~((y >= low) & (y <= high)))  # binary labels, 0/1, are always inside
    if outside.size:
        raise NodeError(
            f"{outside.size} of {name}'s labels lie outside the task's label range [{low:g}, {high:g}] (the "
            f"first: {y[outside[0]]:g} in row {outside[0] + 1}): the task divides its labels by "
            f"{task_params.label_scale:g} from that range, so labels in other units would not train"
        )
    params = TrainParams.of_task(task_params, settings.delta)
    privacy = plan(task_params.epsilon, task_params.delta, params.trees, params.depth)
    rule = EndorsementRule.of(
        ref.ENDORSE_RULES[task_params.endorse],
        task_params.refusal_rate,
        task_params.overlap_threshold,
        privacy,
    )
    if isinstance(data, ParquetParty):
        refusal = _chunked_refusal(data, rule, settings)
        if refusal:
            raise NodeError(f"{name}: a party whose rows are a Parquet dataset {refusal}")
    return TaskTerms(cfg, feature_low, feature_high, label_range, params, privacy, rule)


def _chunked_refusal(data: ParquetParty, rule: EndorsementRule, settings: NodeSettings) -> str | None:
    """What a party reading its rows chunk by chunk does not play, or None: a scheduler without parts (its passes
    run on the parts' workers), a privacy budget (its noisy histograms and votes are built over slots in memory), the
    overlap rule (its estimate sums float histograms of the verifier's rows, which the chunked rows do not sum) and
    attacks (experiments on rows in memory)."""
    if data.scheduler is not None and not data.parts:
        return "runs on Dask workers over its parts: a scheduler needs parts"
    if rule.private:
        return "does not train a task with a privacy budget (epsilon); give its rows with --data"
    if rule.rule == ref.ENDORSE_OVERLAP:
        return "endorses under the statistical rule only, not the task's overlap rule"
    if settings.attack is not None:
        return "runs no attack"
    return None


class Joiner:
    """This party's way into a task, up to the start of training."""

    def __init__(self, session: PartySession, terms: TaskTerms, endpoint: str) -> None:
        self.s = session
        self.low, self.high, self.label_range = terms.low, terms.high, terms.label_range
        self.endpoint = endpoint
        """The endorsement endpoint this party joins with (the other parties ask it for endorsements)."""

    def rngs(self) -> tuple[np.random.Generator, np.random.Generator]:
        """The noise streams of the bin sketch and the PSD sent with the join: from the same seed as the training
        noise (``noise_seed``), so that a node restarted before its join was mined sends the same payload again
        (with fresh noise, a second PSD could land on chain, in a reverted transaction's public calldata)."""
        seed, index = self.noise_seed(), self.s.settings.party_index
        return sketch_rng(seed, index), psd_rng(seed, index)

    def noise_seed(self) -> int:
        """The seed of the DP noise this party adds: the experiment's, or else one derived from its key for this task
        (``secret_noise_seed``: a restart draws the same noise, so nothing is released twice)."""
        s = self.s.settings
        if s.seed is not None:
            return s.seed
        task = self.s.task
        return secret_noise_seed(bytes(self.s.account.key), task.client.chain_id, task.address, self.s.task_id)

    def registered_endpoint(self) -> str | None:
        """The endorsement endpoint this party joined the task with (its ``JoinRequested``), None before it joined."""
        task = self.s.task
        for ev in task.client.logs(task.contract, ["JoinRequested"], self.s.task_id):
            if str(ev.args["party"]) == self.s.address:
                return str(ev.args["endpoint"])
        return None

    def join(self) -> None:
        """Ask to join with the PSD and binning sketch, unless this key already did (a restart)."""
        task, task_id, data, privacy, params = self.s.task, self.s.task_id, self.s.data, self.s.privacy, self.s.params
        status = task.member(task_id, self.s.address)[0]
        if status != Membership.NONE:
            self.s.log(f"already joined (status {status.name.lower()})")
            return
        s = self.s.settings
        sketch_noise, psd_noise = self.rngs()
        sketch_epsilon = privacy.sketch_epsilon if privacy.private else s.binning_epsilon
        lows, highs = np.append(self.low, self.label_range[0]), np.append(self.high, self.label_range[1])
        levels = label_levels_for(params.objective, params.bins) if s.psd_label_first else 0
        psd_epsilon = privacy.psd_epsilon if privacy.private else s.psd_epsilon
        n_features = _shape(data)[1]
        scale = psd_budget(psd_epsilon, s.psd_depth, n_features + 1, label_levels=levels).leaf_scale
        psd_options = {"depth": s.psd_depth, "max_rows": s.psd_max_rows, "epsilon": psd_epsilon, "rng": psd_noise}
        if isinstance(data, ParquetParty):  # chunk by chunk: the same sketch and PSD, bit for bit
            sketch = data.sketch(
                self.low, self.high, resolution=s.binning_resolution, epsilon=sketch_epsilon, rng=sketch_noise
            )
            psd = data.psd(lows, highs, label_levels=levels, **psd_options)
        else:
            sketch = local_sketch(
                data.X, self.low, self.high, resolution=s.binning_resolution, epsilon=sketch_epsilon, rng=sketch_noise
            )
            psd = build_psd(data.X, data.y, lows, highs, label_levels=levels, **psd_options)  # type: ignore[arg-type]
        payload = encode_join(psd, scale, sketch)
        task.join(self.s.account, task_id, payload, self.endpoint)
        self.s.log(f"joined task {task_id}: PSD with {psd.num_leaves} leaves, {len(payload)} bytes published")

    def wait_for_start(self) -> None:
        """Until the requester approved this party and started training; refusal or cancellation is fatal."""
        task, task_id, settings = self.s.task, self.s.task_id, self.s.settings
        announced = False
        since = time.monotonic()
        while True:
            status = task.member(task_id, self.s.address)[0]
            if status == Membership.REFUSED:
                raise NodeError(f"the requester refused this party ({self.s.address})")
            st = task.state(task_id)
            if st.status == Status.CANCELLED:
                raise NodeError(f"task {task_id} was cancelled")
            if status == Membership.APPROVED and not announced:
                self.s.log("approved")
                announced = True
            if st.status in (Status.TRAINING, Status.COMPLETED):
                if status != Membership.APPROVED:
                    raise NodeError("training started without this party")
                break
            quick = time.monotonic() - since < 1.0
            time.sleep(settings.start_poll_seconds if quick else settings.poll_seconds)
        # the start's logs (the bin edges) may be served a moment after the state that says training started
        for attempt in range(200):
            try:
                self.prepare()
                return
            except ModelNotReady:
                if attempt == 199:
                    raise
                time.sleep(settings.poll_seconds * 4)

    def prepare(self) -> None:
        """Bin with the published edges and build the distribution weights from every party's PSD."""
        s = self.s
        task, task_id, data = s.task, s.task_id, s.data
        try:
            edges = task_edges(task, task_id)
        except EdgesFormatError as exc:
            raise NodeError(f"task {task_id}'s published bin edges are not readable ({exc}): not training") from exc
        s.params = s.params.fitted(edges)  # histograms as wide as the edges need, as the contract takes them
        s.parties = task.parties(task_id)
        s.index = s.parties.index(s.address)
        payloads: dict[str, Event] = {}
        for ev in task.client.logs(task.contract, ["JoinRequested"], task_id):
            payloads[str(ev.args["party"])] = ev
        published = []
        for p in s.parties:
            published.append(decode_join(bytes(payloads[p].args["psd"])))
            s.endpoints[p] = str(payloads[p].args["endpoint"])
        psds = [pub.psd for pub in published]
        scales = [pub.psd_scale for pub in published]
        party = (
            self._chunked(edges, psds, scales)
            if isinstance(data, ParquetParty)
            else self._in_memory(edges, psds, scales)
        )
        with s.lock:
            s.party = party
            s.party.attack = s.settings.attack
        if s.settings.relay:
            block_seconds = s.settings.block_seconds
            if block_seconds is None:
                block_seconds = measured_block_seconds(task.client)
            ttl = relay_ttl(block_seconds)
            s.relay = RelayChannel(task, task_id, s.account, s.parties, s.endpoints, s.verifiers, ttl)
            if ttl > RELAY_TTL_SECONDS:
                s.log(f"blocks every {block_seconds:g} s: relayed requests live {ttl} s")
        s.log(f"training started: party {s.index} of {len(s.parties)}, {s.party.n_rows} rows")

    def _in_memory(self, edges: EdgesLike, psds: list[PSD], scales: list[float]) -> LocalParty:
        """This party over its rows in memory: W, its verifier's estimators, and its slots binned with ``edges``."""
        s = self.s
        data = s.data
        assert isinstance(data, Dataset)
        s.W, w_star = distribution_weights(data.X, data.y, psds, s.settings.delta)
        if s.privacy.private:
            # under a budget rows weigh delta each: w* divides by this party's exact rows per PSD leaf, which no
            # mechanism covers (node.privacy.inventory; the simulator does the same)
            w_star = np.full(data.n_rows, min(s.settings.delta, 1.0))  # weights up to 1 keep the per-row bounds
        s.estimators = estimators_for(data.X, data.y, s.W, psds, scales)
        return LocalParty(
            bin_matrix(data.X, edges),
            data.y,
            s.params,
            w_star,
            privacy=s.privacy,
            noise_seed=self.noise_seed(),
            index=s.settings.party_index,
            widths=slot_widths(edges),
        )

    def _chunked(self, edges: EdgesLike, psds: list[PSD], scales: list[float]) -> LocalParty:
        """This party over its Parquet rows (``ParquetParty``): W, each row's leaf in every PSD and w* in one pass,
        its slots written chunk by chunk (here, or on its Dask workers' disks for its parts), votes, histograms,
        routing and its verifier's cells then chunk by chunk; the same values as in memory
        (``node.protocol.chunked_rows``)."""
        s = self.s
        data = s.data
        assert isinstance(data, ParquetParty)
        s.W, w_star, leaves = data.distribution(psds, s.settings.delta)
        s.estimators = data.estimators(s.W, leaves, psds, scales)
        nbins = s.params.nbins
        if data.parts:  # binned here chunk by chunk, each part's slots written on its worker's disk
            data.bin_parts(edges, nbins)
        else:
            data.bin(edges, nbins)
        rows, labels = data.rows_of(len(data.features()), nbins), data.labels()
        if rows.n_rows != labels.shape[0]:
            raise NodeError(
                f"{data.slots} holds {rows.n_rows} rows of slots for {labels.shape[0]} rows in {data.rows}: it holds "
                "files of other rows too; give slots an empty folder"
            )
        return LocalParty(
            rows,
            labels,
            s.params,
            w_star,
            privacy=s.privacy,
            noise_seed=self.noise_seed(),
            index=s.settings.party_index,
            widths=slot_widths(edges),
        )
