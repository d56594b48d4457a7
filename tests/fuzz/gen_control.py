"""Op generators (mixin of gen_ops.OpCases): control flow (If, Loop, Scan) with small bodies that
read outer-scope values, runtime and absent conditions, trip counts of 0, negative and past the
unroll limit, and scan directions and axes (negative ones from opset 11)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from .fuzzlib import NP_OF, TensorProto
from .gen_data import data, rand_shape

F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


class ControlGen:
    def _cf_type(self):
        return int(self.rng.choice(np.asarray([F32, F32, F32, I32, I64])))

    def gen_If(self, cid):
        r = self.rng
        t = self._cf_type()
        shape = rand_shape(r, hi=3)
        x, y = data(r, shape, t), data(r, shape, t)
        # Branches read x and y from the enclosing graph; sometimes the two branches' outputs
        # differ in shape (legal: the output is the taken branch's).
        then_nodes = [helper.make_node("Add", [f"{cid}_x0", f"{cid}_x1"], [f"{cid}_t"],
                                       name=f"{cid}_tadd")]
        mag = None
        extra, kind = {}, ""
        if len(shape) >= 1 and shape[0] >= 1 and r.random() < 0.25:
            # The then branch gathers rows by a runtime index that may be out of range: an error
            # only where the branch is taken (a runtime If selected on the device must not raise
            # for the branch it does not take). Same output shape as the else branch's product.
            n0 = shape[0]
            idx = r.integers(0, n0, size=n0).astype(np.int64)
            if r.random() < 0.5:
                idx[int(r.integers(n0))] = int(r.choice([n0, -n0 - 1, 1 << 40]))
            extra[f"{cid}_x2"] = idx
            kind = f" gather {idx.tolist()}"
            then_nodes = [helper.make_node("Gather", [f"{cid}_x0", f"{cid}_x2"], [f"{cid}_t"],
                                           name=f"{cid}_tgather", axis=0)]
        if kind:
            else_nodes = [helper.make_node("Mul", [f"{cid}_x0", f"{cid}_x1"], [f"{cid}_e"],
                                           name=f"{cid}_emul")]
        elif r.random() < 0.3:
            else_nodes = [helper.make_node("ReduceSum", [f"{cid}_x0"], [f"{cid}_e"],
                                           name=f"{cid}_esum", keepdims=0)]
            # A sum rounds at its terms' magnitude, not its result's (seed 120, o17_4: ten terms
            # up to 2.9 summing to 0.011, one ulp apart between the EP's order and ORT's).
            if np.issubdtype(x.dtype, np.floating):
                mag = [float(np.abs(x.astype(np.float64)).sum())]
        else:
            else_nodes = [helper.make_node("Mul", [f"{cid}_x0", f"{cid}_x1"], [f"{cid}_e"],
                                           name=f"{cid}_emul")]
        then_g = helper.make_graph(then_nodes, f"{cid}_then", [], [_vi(f"{cid}_t", t, None)])
        else_g = helper.make_graph(else_nodes, f"{cid}_else", [], [_vi(f"{cid}_e", t, None)])
        cond = np.array(r.random() < 0.5)
        feeds = {f"{cid}_x0": x, f"{cid}_x1": y, f"{cid}_c": cond, **extra}
        node = helper.make_node("If", [f"{cid}_c"], [f"{cid}_y0"], name=f"{cid}_n",
                                then_branch=then_g, else_branch=else_g)
        return self.case(cid, "If", [node], feeds, [f"{cid}_y0"], mag=mag,
                         label=f"If {NP_OF[t].__name__} {shape} cond={bool(cond)}{kind}")

    def gen_Loop(self, cid):
        r = self.rng
        t = self._cf_type()
        shape = rand_shape(r, hi=3)
        x = data(r, shape, t, "small")
        trip = int(r.choice([0, 1, 2, 3, 5]))
        if r.random() < 0.06:
            trip = int(r.choice([-1, -(1 << 40), 300]))  # none, none, past the unroll limit
        stop = int(r.integers(0, 6))  # the body's condition: i + 1 < stop
        use_trip = r.random() < 0.8
        use_cond = r.random() < 0.5 or not use_trip
        data_cond = r.random() < 0.5 or not use_trip
        p = f"{cid}_b"
        # A Gather by the iteration number from an outer-scope table of `stop` values: out of
        # range in the iterations from `stop` on (past the loop's end when the body's condition
        # ends it; an error where the trip count runs on).
        gather = r.random() < 0.4
        nodes = [helper.make_node("Cast", [f"{p}_i"], [f"{p}_ci"], name=f"{p}_cast", to=t),
                 helper.make_node("Add", [f"{p}_xin", f"{p}_ci"], [f"{p}_s0"], name=f"{p}_add")]
        if gather:
            nodes += [helper.make_node("Gather", [f"{cid}_table", f"{p}_i"], [f"{p}_g"],
                                       name=f"{p}_gather", axis=0),
                      helper.make_node("Add", [f"{p}_s0", f"{p}_g"], [f"{p}_s"], name=f"{p}_addg")]
        else:
            nodes.append(helper.make_node("Identity", [f"{p}_s0"], [f"{p}_s"], name=f"{p}_ids"))
        # outer-scope read: the step added each iteration
        nodes += [helper.make_node("Add", [f"{p}_s", f"{cid}_x1"], [f"{p}_xout"], name=f"{p}_add2"),
                  helper.make_node("Neg", [f"{p}_xout"], [f"{p}_scan"], name=f"{p}_neg")]
        if data_cond:
            nodes += [helper.make_node("Add", [f"{p}_i", f"{cid}_one"], [f"{p}_i1"], name=f"{p}_inc"),
                      helper.make_node("Less", [f"{p}_i1", f"{cid}_stop"], [f"{p}_cout"],
                                       name=f"{p}_less")]
        else:
            nodes.append(helper.make_node("Identity", [f"{p}_cin"], [f"{p}_cout"], name=f"{p}_cid"))
        body = helper.make_graph(
            nodes, f"{cid}_body",
            [_vi(f"{p}_i", I64, []), _vi(f"{p}_cin", BOOL, []), _vi(f"{p}_xin", t, list(shape))],
            [_vi(f"{p}_cout", BOOL, []), _vi(f"{p}_xout", t, list(shape)),
             _vi(f"{p}_scan", t, list(shape))])
        step = data(r, (), t, "small")
        feeds = {f"{cid}_x0": x, f"{cid}_x1": step}
        if gather:
            feeds[f"{cid}_table"] = data(r, (max(stop, 1),), t, "small")
        consts = {f"{cid}_one": np.array(1, np.int64), f"{cid}_stop": np.array(stop, np.int64)}
        trip_name = ""
        if use_trip:
            trip_name = f"{cid}_m"
            (consts if r.random() < 0.4 else feeds)[trip_name] = np.array(trip, np.int64)
        cond_name = ""
        if use_cond:
            cond_name = f"{cid}_c"
            feeds[cond_name] = np.array(r.random() < 0.8)
        node = helper.make_node("Loop", [trip_name, cond_name, f"{cid}_x0"], [f"{cid}_y0", f"{cid}_y1"],
                                name=f"{cid}_n", body=body)
        return self.case(cid, "Loop", [node], feeds, [f"{cid}_y0", f"{cid}_y1"], consts,
                         label=f"Loop {NP_OF[t].__name__} {shape} trip={trip if use_trip else '-'} "
                               f"cond={'in' if use_cond else '-'} stop={stop if data_cond else '-'}"
                               f"{' gather' if gather else ''}")

    def gen_Scan(self, cid):
        if self.opset < 9:
            return None
        r = self.rng
        t = self._cf_type()
        rank = int(r.integers(1, 4))
        xshape = [int(r.integers(1, 4)) for _ in range(rank)]
        axis = int(r.integers(0, rank))
        elem = xshape[:axis] + xshape[axis + 1:]
        x = data(r, tuple(xshape), t, "small")
        s0 = data(r, tuple(elem), t, "small")
        p = f"{cid}_b"
        body = helper.make_graph(
            [helper.make_node("Add", [f"{p}_s", f"{p}_x"], [f"{p}_sout"], name=f"{p}_add"),
             helper.make_node("Mul", [f"{p}_x", f"{cid}_x2"], [f"{p}_y"], name=f"{p}_mul")],
            f"{cid}_body", [_vi(f"{p}_s", t, elem), _vi(f"{p}_x", t, elem)],
            [_vi(f"{p}_sout", t, elem), _vi(f"{p}_y", t, elem)])
        attrs = {"num_scan_inputs": 1}
        neg = self.opset >= 11
        if r.random() < 0.6:
            attrs["scan_input_axes"] = [axis - (rank if neg and r.random() < 0.4 else 0)]
        elif axis != 0:
            return self.gen_Scan(cid)  # redraw: the default axis 0 needs a body of that slice
        if r.random() < 0.5:
            attrs["scan_input_directions"] = [int(r.integers(2))]
        if r.random() < 0.5:
            attrs["scan_output_directions"] = [int(r.integers(2))]
        if r.random() < 0.5:
            out_rank = len(elem) + 1
            oa = int(r.integers(0, out_rank))
            attrs["scan_output_axes"] = [oa - (out_rank if neg and r.random() < 0.4 else 0)]
        scale = data(r, (), t, "small")
        feeds = {f"{cid}_x0": s0, f"{cid}_x1": x, f"{cid}_x2": scale}
        node = helper.make_node("Scan", [f"{cid}_x0", f"{cid}_x1"], [f"{cid}_y0", f"{cid}_y1"],
                                name=f"{cid}_n", body=body, **attrs)
        return self.case(cid, "Scan", [node], feeds, [f"{cid}_y0", f"{cid}_y1"],
                         label=f"Scan {NP_OF[t].__name__} {xshape} {attrs}")
