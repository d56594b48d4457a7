"""The shared_input_matmul pattern (src/ortmlx/ops/patterns/shared_input_matmul.cpp): MatMuls
that read one input with constant 2-D weights of one K (an attention layer's Q, K and V
projections) run as one product with the concatenated weight, the outputs slices of its last
axis, equal to ORT's CPU EP.

The pattern is on by default (ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL=0 turns it off) and
applies where MatMul runs on MLX's own matmul: GPU backends. On MLX's CPU backend float32 MatMul
goes through OpenBLAS and the pattern is off; the internal switch ORTMLX_INTERNAL_CPU_MATMUL=mlx
(MLX's own matmul there) turns it on, which is how these tests exercise it on the CPU flavour."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import make_model, mlx_backend, random_array
from pattern_check import run_pattern

PATH = "MatMuls of one input -> one matmul with the concatenated weights"


@pytest.fixture
def mlx_matmul(monkeypatch):
    """MLX's own matmul on its CPU backend (GPU backends use it anyway), the pattern at its
    default (on)."""
    monkeypatch.delenv("ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL", raising=False)
    monkeypatch.setenv("ORTMLX_INTERNAL_CPU_MATMUL", "mlx")


def const(name, value):
    return onnx.numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def taken(report):
    return report.counters().get("pattern.shared_input_matmul", 0)


def attention_block(b=2, s=5, heads=2, d_head=8, projections=3, q_out=False):
    """A self-attention block as torch exports it: Q, K, V = x W + b (each MatMul then a bias
    Add), heads split, softmax(q k^T / sqrt(d)) v, heads merged. With projections=2 the keys
    double as the values (two MatMuls of x)."""
    n = h.make_node
    d = heads * d_head
    rng = np.random.default_rng(3)
    names = ["q", "k", "v"][:projections]
    inits = [onnx.numpy_helper.from_array(np.array([b, s, heads, d_head], np.int64), "shape4"),
             onnx.numpy_helper.from_array(np.array([b, s, d], np.int64), "shape3"),
             const("c", 1.0 / np.sqrt(d_head))]
    nodes = []
    for p in names:
        inits += [const(f"w_{p}", rng.uniform(-0.5, 0.5, (d, d))),
                  const(f"b_{p}", rng.uniform(-0.5, 0.5, d))]
        nodes += [n("MatMul", ["x", f"w_{p}"], [f"{p}_mm"], name=f"{p}_proj"),
                  n("Add", [f"{p}_mm", f"b_{p}"], [f"{p}_lin"], name=f"{p}_bias"),
                  n("Reshape", [f"{p}_lin", "shape4"], [f"{p}_4"], name=f"{p}_split")]
    v = "v" if projections == 3 else "k"
    nodes += [n("Transpose", ["q_4"], ["qh"], name="q_heads", perm=[0, 2, 1, 3]),
              n("Transpose", ["k_4"], ["kt"], name="k_heads_t", perm=[0, 2, 3, 1]),
              n("Transpose", [f"{v}_4"], ["vh"], name="v_heads", perm=[0, 2, 1, 3]),
              n("MatMul", ["qh", "kt"], ["sc"], name="qk"),
              n("Mul", ["sc", "c"], ["scs"], name="scale"),
              n("Softmax", ["scs"], ["pr"], name="softmax", axis=-1),
              n("MatMul", ["pr", "vh"], ["ctx"], name="pv"),
              n("Transpose", ["ctx"], ["ctx_t"], name="merge", perm=[0, 2, 1, 3]),
              n("Reshape", ["ctx_t", "shape3"], ["y"], name="merge_heads")]
    outs = [h.make_tensor_value_info("y", T.FLOAT, [b, s, d])]
    if q_out:  # an interior product that is also a graph output
        outs.append(h.make_tensor_value_info("q_mm", T.FLOAT, [b, s, d]))
    graph = h.make_graph(nodes, "attn", [h.make_tensor_value_info("x", T.FLOAT, [b, s, d])], outs,
                         inits)
    return make_model(graph)


@pytest.mark.parametrize("projections", [3, 2])
def test_qkv_of_an_attention_block(projections, mlx_matmul, rng):
    model = attention_block(projections=projections)
    report = run_pattern(model, {"x": random_array(rng, (2, 5, 16))})
    assert taken(report) == 1
    assert report.paths()[PATH]["fast"]


def test_interior_product_as_fused_output(mlx_matmul, rng):
    model = attention_block(q_out=True)
    report = run_pattern(model, {"x": random_array(rng, (2, 5, 16))})
    assert taken(report) == 1 and PATH in report.paths()


def projections(a_shape, widths, weights=None, a_names=None, weight_inputs=()):
    """y_i = MatMul(a_i, w_i) for each width, every product a graph output."""
    n = h.make_node
    rng = np.random.default_rng(5)
    k = a_shape[-1]
    a_names = a_names or ["a"] * len(widths)
    inputs = [h.make_tensor_value_info(a, T.FLOAT, list(a_shape)) for a in dict.fromkeys(a_names)]
    inits, nodes, outs = [], [], []
    for i, (a, nw) in enumerate(zip(a_names, widths)):
        shape = (weights or {}).get(i, (k, nw))
        if i in weight_inputs:
            inputs.append(h.make_tensor_value_info(f"w{i}", T.FLOAT, list(shape)))
        else:
            inits.append(const(f"w{i}", rng.uniform(-1, 1, shape)))
        nodes.append(n("MatMul", [a, f"w{i}"], [f"y{i}"], name=f"mm{i}"))
        out_shape = np.matmul(np.zeros(a_shape), np.zeros(shape)).shape
        outs.append(h.make_tensor_value_info(f"y{i}", T.FLOAT, list(out_shape)))
    return make_model(h.make_graph(nodes, "proj", inputs, outs, inits))


def feeds_of(model, rng):
    return {vi.name: random_array(rng, [d.dim_value for d in vi.type.tensor_type.shape.dim])
            for vi in model.graph.input}


@pytest.mark.parametrize("a_shape,widths", [((5, 12), (7, 3)), ((2, 5, 12), (16, 8, 24)),
                                            ((2, 3, 4, 12), (4, 4, 4, 1)), ((1, 300), (9, 9, 9))],
                         ids=str)
def test_products_of_one_input(a_shape, widths, mlx_matmul, rng):
    """Outputs of different widths are the right slices; rank 2 to 4."""
    model = projections(a_shape, widths)
    report = run_pattern(model, feeds_of(model, rng))
    assert taken(report) == 1 and PATH in report.paths()


def test_two_groups(mlx_matmul, rng):
    """Two inputs with two products each: two pattern nodes."""
    model = projections((3, 8), (4, 5, 6, 7), a_names=["a", "b", "a", "b"])
    report = run_pattern(model, feeds_of(model, rng))
    assert taken(report) == 2


@pytest.mark.parametrize("variant", ["other_inputs", "weight_input", "weight_3d", "single",
                                     "option_off"])
def test_not_taken(variant, mlx_matmul, rng):
    opts = None
    if variant == "other_inputs":
        model = projections((3, 8), (4, 5), a_names=["a", "b"])
    elif variant == "weight_input":
        model = projections((3, 8), (4, 5), weight_inputs=(1,))
    elif variant == "weight_3d":
        model = projections((2, 3, 8), (4, 5), weights={1: (2, 8, 5)})
    elif variant == "single":
        model = projections((3, 8), (4,))
    else:
        model = projections((3, 8), (4, 5))
        opts = {"fast_patterns": "0"}
    report = run_pattern(model, feeds_of(model, rng), opts)
    assert taken(report) == 0 and PATH not in report.paths()


def test_weight_input_leaves_the_other_two(mlx_matmul, rng):
    """Three products, one weight a graph input: the other two are taken."""
    model = projections((3, 8), (4, 5, 6), weight_inputs=(1,))
    report = run_pattern(model, feeds_of(model, rng))
    assert taken(report) == 1 and PATH in report.paths()


@pytest.mark.skipif(mlx_backend() != "cpu", reason="MLX's CPU backend only")
def test_not_taken_with_openblas(rng):
    """On MLX's CPU backend float32 MatMul runs on OpenBLAS: the pattern is off (and MatMul +
    bias takes the products instead)."""
    model = attention_block()
    report = run_pattern(model, {"x": random_array(rng, (2, 5, 16))})
    assert taken(report) == 0 and PATH not in report.paths()
    assert report.counters().get("pattern.matmul_add", 0) == 3


def test_off_when_asked(monkeypatch, rng):
    """ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL=0 turns the pattern off."""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL", "0")
    monkeypatch.setenv("ORTMLX_INTERNAL_CPU_MATMUL", "mlx")
    model = attention_block()
    report = run_pattern(model, {"x": random_array(rng, (2, 5, 16))})
    assert taken(report) == 0 and PATH not in report.paths()


@pytest.mark.skipif(mlx_backend() == "cpu", reason="GPU backends only")
def test_taken_on_gpu_backends_by_default(monkeypatch, rng):
    monkeypatch.delenv("ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL", raising=False)
    model = attention_block()
    report = run_pattern(model, {"x": random_array(rng, (2, 5, 16))})
    assert taken(report) == 1 and report.paths()[PATH]["fast"]


def test_products_interleaved_with_their_readers(mlx_matmul, rng):
    """a produced inside the graph; each product read before the next MatMul, and the last
    product read by a node that also reads the first reader's result: the pattern node at the
    first MatMul's place keeps every reader after it."""
    n = h.make_node
    w_rng = np.random.default_rng(11)
    inits = [const(f"w{i}", w_rng.uniform(-1, 1, (8, 6))) for i in range(3)]
    nodes = [n("Relu", ["x"], ["a"], name="relu"),
             n("MatMul", ["a", "w0"], ["p0"], name="mm0"),
             n("Tanh", ["p0"], ["t0"], name="t0"),
             n("MatMul", ["a", "w1"], ["p1"], name="mm1"),
             n("Mul", ["t0", "p1"], ["m1"], name="mul1"),
             n("Relu", ["m1"], ["r1"], name="r1"),
             n("MatMul", ["a", "w2"], ["p2"], name="mm2"),
             n("Add", ["r1", "p2"], ["y"], name="add")]
    graph = h.make_graph(nodes, "interleaved", [h.make_tensor_value_info("x", T.FLOAT, [3, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [3, 6])], inits)
    report = run_pattern(make_model(graph), {"x": random_array(rng, (3, 8))})
    assert taken(report) == 1 and report.paths()[PATH]["fast"]
