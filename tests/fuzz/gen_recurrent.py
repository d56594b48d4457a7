"""Op generators (mixin of gen_ops.OpCases): RNN, GRU, LSTM with random directions, activation
lists (names in any case for GRU/LSTM, alpha/beta lists of any length), clip, initial states,
peepholes, sequence lengths (0 and out of range included), output subsets and, rarely, weights of
the wrong shape (ORT CPU raises; so must the EP)."""

from __future__ import annotations

import numpy as np

from .fuzzlib import TensorProto
from .gen_data import floats
from .hostile import hpick

F32 = TensorProto.FLOAT
ACTS = ("Sigmoid Tanh Relu Affine LeakyRelu ThresholdedRelu ScaledTanh HardSigmoid Elu Softsign "
        "Softplus").split()
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS_PER_DIR = {"RNN": 1, "GRU": 2, "LSTM": 3}
SIGMOID, TANH = ACTS[:2]
DEFAULT_ACTS = {"RNN": [TANH], "GRU": [SIGMOID, TANH], "LSTM": [SIGMOID, TANH, TANH]}
LOOSE = 30.0  # gates chain matmuls and transcendental functions over the steps


class RecurrentGen:
    def _recurrent(self, cid, op):
        r = self.rng
        g = GATES[op]
        T, B, I, H = (int(r.integers(1, 7)), int(r.integers(1, 4)), int(r.integers(1, 6)),
                      int(r.integers(1, 6)))
        direction = str(r.choice(["forward", "reverse", "bidirectional"]))
        nd = 2 if direction == "bidirectional" else 1
        attrs = {"hidden_size": H}
        if direction != "forward" or r.random() < 0.3:
            attrs["direction"] = direction
        if r.random() < 0.4:
            names = []
            for _ in range(nd):
                names += [str(r.choice(ACTS)) if r.random() < 0.6 else d
                          for d in DEFAULT_ACTS[op]]
            if op != "RNN" and r.random() < 0.3:  # ORT's GRU/LSTM take any case
                names = [n.lower() if r.random() < 0.5 else n.upper() for n in names]
            attrs["activations"] = names
            if r.random() < 0.6:
                attrs["activation_alpha"] = [float(v) for v in
                                             r.uniform(0.05, 1.5, int(r.integers(nd, 7)))]
            if r.random() < 0.6:
                attrs["activation_beta"] = [float(v) for v in
                                            r.uniform(-0.5, 0.8, int(r.integers(nd, 7)))]
        if r.random() < 0.25:
            attrs["clip"] = float(r.choice([0.5, 1.0, 3.0]))
        if op == "GRU" and r.random() < 0.5:
            attrs["linear_before_reset"] = int(r.integers(2))
        if op == "LSTM" and r.random() < 0.2:
            attrs["input_forget"] = 1
        scale = float(r.choice([0.3, 0.6, 1.0]))
        x = floats(r, (T, B, I), F32, -2, 2)
        w = floats(r, (nd, g * H, I), F32, -scale, scale)
        rw = floats(r, (nd, g * H, H), F32, -scale, scale)
        bad = ""
        if r.random() < 0.03:  # a W ORT rejects: the EP must raise too
            w = floats(r, (nd, g * H + 1, I), F32, -scale, scale)
            bad = " (W of the wrong shape)"
        arrays = [x, w, rw]
        arrays.append(floats(r, (nd, 2 * g * H), F32, -scale, scale) if r.random() < 0.7
                      else None)
        lens = None
        if r.random() < 0.35:
            lens = r.integers(0, T + 1, size=(B,)).astype(np.int32)
            if r.random() < 0.1:
                lens[0] = hpick(r, [T + 1, -1, 1 << 30])
                bad += " (a length out of range)"
        arrays.append(lens)
        arrays.append(floats(r, (nd, B, H), F32, -1, 1) if r.random() < 0.5 else None)
        if op == "LSTM":
            arrays.append(floats(r, (nd, B, H), F32, -1, 1) if r.random() < 0.5 else None)
            arrays.append(floats(r, (nd, 3 * H), F32, -scale, scale) if r.random() < 0.3
                          else None)
        n_out = int(r.integers(1, {"LSTM": 3}.get(op, 2) + 1))
        # Outputs are activations of O(1) inputs: an absolute scale of 1 for the tiny values
        # that cancellation leaves (relative error alone is meaningless there).
        case = self.emit(cid, op, arrays, attrs, n_out=n_out, tol_scale=LOOSE, mag=[1.0] * n_out,
                         label=f"lens={None if lens is None else lens.tolist()}{bad}")
        if n_out > 1 and r.random() < 0.3:  # Y absent: the final states alone
            node = case.nodes[0]
            case.outputs = [o for o in case.outputs if o != node.output[0]]
            node.output[0] = ""
        return case

    def gen_RNN(self, cid):
        return self._recurrent(cid, "RNN")

    def gen_GRU(self, cid):
        return self._recurrent(cid, "GRU")

    def gen_LSTM(self, cid):
        return self._recurrent(cid, "LSTM")
