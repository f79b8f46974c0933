"""FedXGBllr (Ma et al., "Gradient-less Federated Gradient Boosting Trees with Learnable Learning Rates"),
as a baseline in the same harness as FV-tree.

**Round 0.** Each client trains its share of the trees (``T / K`` of the task's ``T``) on its own rows alone and sends
them to the server, which broadcasts all ``K`` ensembles in client order. Every client then evaluates every tree on
its rows: a row becomes the vector of the ``T`` trees' outputs.

**Rounds 1..R.** The learnable learning rates: a one-layer 1D CNN over that vector, kernel size and stride equal to
``T / K`` (so each of its ``C = 64`` channels is one learning rate per tree of one client's ensemble), ReLU, then a
fully connected layer to one output (the weights of the clients' ensembles). It is trained by FedAvg: each round the
server sends the weights, each client runs ``E`` local epochs of Adam on minibatches of its rows, and the server
averages the clients' weights in proportion to their rows. Loss: binary cross-entropy on the logit, or the mean
squared error for regression. The paper's settings are the defaults: R = 10, E = 100, B = 64, Adam with learning
rate 0.001 and betas (0.5, 0.999), Kaiming initialisation, 64 channels.

**Departures.** The clients' trees are LightGBM's on the raw values (the paper uses the xgboost package, which is
not a dependency here), with the task's depth, learning rate, lambda and minimum rows (``node.baselines.centralized.
own_bins_params``); a tree's output is its leaf value. The network and Adam are written in numpy (the paper uses
PyTorch under Flower; a test checks the gradients against finite differences). Each client starts Adam afresh every
round, as a client that builds its optimiser in each ``fit`` call does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import lightgbm as lgb
import numpy as np

from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.baselines.seed_systems import SeedInputs, SeedResult

CHANNELS = 64
ROUNDS = 10
EPOCHS = 100
BATCH = 64
ADAM_LR, ADAM_BETAS, ADAM_EPS = 1e-3, (0.5, 0.999), 1e-8
PARAM_BYTES = 4
"""The network's weights travel as 32-bit floats, as PyTorch sends them."""


@dataclass
class TreeCNN:
    """The one-layer 1D CNN of the paper's Figure 4(b), its weights as numpy arrays (``names`` fixes their order)."""

    conv_w: np.ndarray  # (channels, trees per client)
    conv_b: np.ndarray  # (channels,)
    fc_w: np.ndarray  # (channels * clients,), flattened channel-major as PyTorch's Flatten of (channels, clients)
    fc_b: np.ndarray  # (1,)
    names: tuple[str, ...] = field(default=("conv_w", "conv_b", "fc_w", "fc_b"), init=False)

    @classmethod
    def init(cls, clients: int, per_client: int, rng: np.random.Generator, channels: int = CHANNELS) -> TreeCNN:
        """Kaiming (He) normal weights for ReLU, zero biases."""
        return cls(
            rng.normal(0.0, np.sqrt(2.0 / per_client), size=(channels, per_client)),
            np.zeros(channels),
            rng.normal(0.0, np.sqrt(2.0 / (channels * clients)), size=channels * clients),
            np.zeros(1),
        )

    @property
    def params(self) -> list[np.ndarray]:
        return [getattr(self, n) for n in self.names]

    def copy(self) -> TreeCNN:
        return TreeCNN(*(p.copy() for p in self.params))

    def size(self) -> int:
        return sum(p.size for p in self.params)

    def forward(self, X: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The outputs (logits or values) of rows of tree outputs ``X`` (rows, clients * per_client), and what the
        backward pass needs. The convolution (kernel = stride = per_client) is one matrix product per client block."""
        per_client = self.conv_w.shape[1]
        xr = X.reshape(-1, per_client)  # (B * K, n): each row's blocks, one per client
        z = (xr @ self.conv_w.T + self.conv_b).reshape(X.shape[0], -1, self.conv_w.shape[0])  # (B, K, C)
        a = np.maximum(z, 0.0).transpose(0, 2, 1).reshape(X.shape[0], -1)  # channel-major flatten of (C, K)
        return a @ self.fc_w + self.fc_b[0], (xr, z)

    def gradients(self, X: np.ndarray, y: np.ndarray, objective: str) -> tuple[float, list[np.ndarray]]:
        """The batch's mean loss and its gradient for every weight."""
        out, (xr, z) = self.forward(X)
        b, channels = X.shape[0], self.conv_w.shape[0]
        if objective == "binary":
            loss = float(np.mean(np.logaddexp(0.0, out) - y * out))
            d_out = (1.0 / (1.0 + np.exp(-out)) - y) / b
        else:
            loss = float(np.mean((out - y) ** 2))
            d_out = 2.0 * (out - y) / b
        a = np.maximum(z, 0.0).transpose(0, 2, 1).reshape(b, -1)
        g_fc_w = a.T @ d_out
        g_fc_b = np.array([d_out.sum()])
        da = (d_out[:, None] * self.fc_w[None, :]).reshape(b, channels, -1).transpose(0, 2, 1)  # (B, K, C)
        dz = (da * (z > 0)).reshape(-1, channels)  # (B * K, C)
        return loss, [dz.T @ xr, dz.sum(axis=0), g_fc_w, g_fc_b]


def client_update(
    net: TreeCNN, X: np.ndarray, y: np.ndarray, objective: str, epochs: int, batch: int, rng: np.random.Generator
) -> TreeCNN:
    """``epochs`` of Adam over shuffled minibatches of the client's rows, from the server's weights."""
    local = net.copy()
    m = [np.zeros_like(p) for p in local.params]
    v = [np.zeros_like(p) for p in local.params]
    (b1, b2), step = ADAM_BETAS, 0
    for _ in range(epochs):
        order = rng.permutation(X.shape[0])
        for start in range(0, X.shape[0], batch):
            idx = order[start : start + batch]
            _, grads = local.gradients(X[idx], y[idx], objective)
            step += 1
            for p, g, mi, vi in zip(local.params, grads, m, v, strict=True):
                mi *= b1
                mi += (1 - b1) * g
                vi *= b2
                vi += (1 - b2) * g * g
                p -= ADAM_LR * (mi / (1 - b1**step)) / (np.sqrt(vi / (1 - b2**step)) + ADAM_EPS)
    return local


def fed_avg(updates: list[TreeCNN], rows: list[int]) -> TreeCNN:
    """The server's average of the clients' weights, each in proportion to its rows."""
    total = float(sum(rows))
    averaged = [np.zeros_like(p) for p in updates[0].params]
    for u, r in zip(updates, rows, strict=True):
        for acc, p in zip(averaged, u.params, strict=True):
            acc += p * (r / total)
    return TreeCNN(*averaged)


def tree_outputs(booster: lgb.Booster, X: np.ndarray) -> np.ndarray:
    """Every tree's output (its leaf value) for every row: (rows, trees)."""
    leaves = np.asarray(booster.predict(X, pred_leaf=True), dtype=np.int64).reshape(X.shape[0], -1)
    out = np.empty(leaves.shape)
    for t in range(leaves.shape[1]):
        values = np.array([booster.get_leaf_output(t, j) for j in range(int(leaves[:, t].max()) + 1)])
        out[:, t] = values[leaves[:, t]]
    return out


def train_fedxgbllr(
    inputs: SeedInputs,
    *,
    rounds: int = ROUNDS,
    epochs: int = EPOCHS,
    batch: int = BATCH,
    channels: int = CHANNELS,
) -> SeedResult:
    """FedXGBllr on the harness's parties (the clients): ``params.trees // K`` trees each, then ``rounds`` of FedAvg
    over the CNN. Communication per client: its trees once (LightGBM's model text) and the CNN's weights each round
    (4 bytes a weight), over the task's trees."""
    p = inputs.params
    clients = len(inputs.party_X)
    if clients < 1 or len(inputs.party_y) != clients:
        raise ValueError("need each client's raw rows and labels, and at least one client")
    per_client = p.trees // clients
    if per_client < 1:
        raise ValueError(f"{p.trees} trees cannot be shared by {clients} clients: each needs at least one")
    if min(rounds, epochs, batch, channels) < 1:
        raise ValueError("rounds, epochs, batch size and channels must be at least 1")
    own = baselines.own_bins_params(p, threads=inputs.threads, seed=inputs.seed)
    boosters = []
    for X, y in zip(inputs.party_X, inputs.party_y, strict=True):
        data = lgb.Dataset(np.asarray(X, dtype=np.float64), label=y, params={"verbose": -1})
        boosters.append(lgb.train(own, data, num_boost_round=per_client))
    tree_bytes = [len(b.model_to_string().encode()) for b in boosters]

    def features(X: np.ndarray) -> np.ndarray:
        """Every client's tree outputs side by side; a client whose LightGBM stopped early (no tree could split)
        has trees that output 0 in the places it did not fill."""
        blocks = []
        for b in boosters:
            block = np.zeros((X.shape[0], per_client))
            block[:, : b.num_trees()] = tree_outputs(b, np.asarray(X, dtype=np.float64))
            blocks.append(block)
        return np.hstack(blocks)

    local = [features(X) for X in inputs.party_X]
    rng = np.random.default_rng([inputs.seed, 0xF1B])
    net = TreeCNN.init(clients, per_client, rng, channels)
    rows = [len(y) for y in inputs.party_y]
    losses = []
    for _ in range(rounds):
        updates = [
            client_update(net, Xk, np.asarray(yk, dtype=np.float64), p.objective, epochs, batch, rng)
            for Xk, yk in zip(local, inputs.party_y, strict=True)
        ]
        net = fed_avg(updates, rows)
        pooled = sum(
            net.gradients(Xk, np.asarray(yk, float), p.objective)[0] * len(yk)
            for Xk, yk in zip(local, inputs.party_y, strict=True)
        )
        losses.append(float(pooled) / sum(rows))
    out, _ = net.forward(features(inputs.test_X))
    sent = [(tb + rounds * net.size() * PARAM_BYTES) / p.trees for tb in tree_bytes]
    return SeedResult(
        test_pred=1.0 / (1.0 + np.exp(-out)) if p.objective == "binary" else out,
        comm_bytes_per_party_per_tree=sent,
        comm_formula="a client's trees once (LightGBM model text) and the CNN's weights every round (4 bytes each), "
        "over the task's trees",
        trees=None,
        details={
            "trees_per_client": per_client,
            "cnn_parameters": net.size(),
            "rounds": rounds,
            "epochs": epochs,
            "batch_size": batch,
            "train_loss_per_round": losses,
        },
    )
