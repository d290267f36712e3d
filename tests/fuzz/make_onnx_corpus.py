#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/onnx_fuzz.cpp (tests/fuzz/corpus/onnx/) with PyTorch's exporter and
onnx.helper, so that the reader is tested on files it did not write. The files are committed; rerun this only to
change them (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 tests/fuzz/make_onnx_corpus.py

good_*.onnx are networks halfmap reads (tests/onnx_test.cpp checks the layers it reads from each); bad_*.onnx are
files it must refuse in one sentence (onnx_test.cpp checks each sentence).
"""
import math
import pathlib

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

out = pathlib.Path(__file__).resolve().parent / "corpus" / "onnx"
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)


def save(name, model):
    (out / name).write_bytes(model if isinstance(model, bytes) else model.SerializeToString())


def torch_models():
    import torch

    torch.manual_seed(0)

    class RMSNorm(torch.nn.Module):
        def __init__(self, n, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.rand(n) + 0.5)

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    mlp = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 16),
        torch.nn.GELU(approximate="tanh"), torch.nn.ReLU(), torch.nn.Linear(16, 12), RMSNorm(12),
        torch.nn.Sigmoid(), torch.nn.Linear(12, 4), torch.nn.Tanh(), torch.nn.Softmax(dim=-1))
    x = torch.randn(32, 8)
    # Its input and PyTorch's float32 output, for onnx_test's float64 forward of what halfmap read.
    data = pathlib.Path(__file__).resolve().parents[1] / "data" / "onnx"
    data.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        np.save(data / "torch_mlp_x.npy", x.numpy())
        np.save(data / "torch_mlp_y.npy", mlp(x).numpy())
    for opset in (13, 17):
        path = out / f"good_torch_mlp_opset{opset}.onnx"
        torch.onnx.export(mlp, x, str(path), opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})

    class Block(torch.nn.Module):
        """A pre-norm transformer MLP block, twice, then a head: x + fc2(gelu(fc1(ln(x))))."""

        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(8, 16)
            self.blocks = torch.nn.ModuleList(torch.nn.Sequential(
                torch.nn.LayerNorm(16), torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
                for _ in range(2))
            self.head = torch.nn.Linear(16, 3)

        def forward(self, x):
            h = self.inp(x)
            for b in self.blocks:
                h = h + b(h)
            return self.head(h)

    block = Block()
    with torch.no_grad():
        np.save(data / "torch_residual_y.npy", block(x).numpy())
    for opset in (13, 17):
        torch.onnx.export(block, x, str(out / f"good_torch_residual_opset{opset}.onnx"), opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})

    class Silu(torch.nn.Module):
        """x * sigmoid(x) written out: a branch that joins by Mul, which halfmap does not read."""

        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.fc(x)
            return h * torch.sigmoid(h)

    torch.onnx.export(Silu(), x, str(out / "bad_branch.onnx"), opset_version=13, input_names=["x"],
                      output_names=["y"])

    class Head(torch.nn.Module):
        """One attention head as written by hand: q, k and v projected from x, softmax(q·kᵀ/√d [+ mask])·v."""

        def __init__(self, f, d, tokens, prescale, mask=None, scale=True):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(f, d) for _ in range(3))
            self.d, self.prescale, self.scale = d, prescale, scale
            self.register_buffer("mask", mask if mask is not None else torch.zeros(0))

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            if self.scale and self.prescale:
                q = q / math.sqrt(self.d)
            a = q @ k.transpose(-2, -1)
            if self.scale and not self.prescale:
                a = a / math.sqrt(self.d)
            if self.mask.numel():
                a = a + self.mask
            return torch.softmax(a, -1) @ v

    tokens = 8
    causal = torch.triu(torch.full((tokens, tokens), float("-inf")), 1)

    class Attention(torch.nn.Module):
        """BERT's placement (scores / √d after the product), no mask, then the output projection."""

        def __init__(self):
            super().__init__()
            self.attn = Head(8, 16, tokens, prescale=False)
            self.out = torch.nn.Linear(16, 8)

        def forward(self, x):
            return self.out(self.attn(x))

    class Decoder(torch.nn.Module):
        """A pre-norm decoder block: x + out(attn(ln1(x))) with q scaled before the product and a causal mask, then
        h + fc2(gelu(fc1(ln2(h)))), then a head."""

        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(8), torch.nn.LayerNorm(8)
            self.attn = Head(8, 16, tokens, prescale=True, mask=causal)
            self.out = torch.nn.Linear(16, 8)
            self.fc1, self.fc2 = torch.nn.Linear(8, 32), torch.nn.Linear(32, 8)
            self.head = torch.nn.Linear(8, 5)

        def forward(self, x):
            h = x + self.out(self.attn(self.ln1(x)))
            h = h + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(h))))
            return self.head(h)

    xs = torch.randn(6, tokens, 8)
    with torch.no_grad():
        np.save(data / "torch_attention_x.npy", xs.reshape(-1, 8).numpy())  # one token per row
    attention = Attention()
    decoder = Decoder()
    with torch.no_grad():
        np.save(data / "torch_attention_y.npy", attention(xs).reshape(-1, 8).numpy())
        np.save(data / "torch_decoder_y.npy", decoder(xs).reshape(-1, 5).numpy())
    axes = {"x": {0: "batch"}, "y": {0: "batch"}}
    for opset in (13, 17):
        torch.onnx.export(attention, xs, str(out / f"good_torch_attention_opset{opset}.onnx"), opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamic_axes=axes)
        torch.onnx.export(decoder, xs, str(out / f"good_torch_decoder_opset{opset}.onnx"), opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamic_axes=axes)
    # Refused: a padding mask (not the causal one), no 1/√d, attention over the rows of a rank-2 input, and a
    # symbolic token count.
    padding = torch.zeros(tokens, tokens)
    padding[:, -2:] = float("-inf")
    for name, head, shape in (("bad_attention_mask", Head(8, 16, tokens, True, mask=padding), (2, tokens, 8)),
                              ("bad_attention_unscaled", Head(8, 16, tokens, True, scale=False), (2, tokens, 8)),
                              ("bad_attention_rank2", Head(8, 16, tokens, True), (tokens, 8))):
        torch.onnx.export(head, torch.randn(*shape), str(out / f"{name}.onnx"), opset_version=13,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}})
    torch.onnx.export(Head(8, 16, tokens, True), xs, str(out / "bad_seq_symbolic.onnx"), opset_version=13,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "tokens"}})


def tensor(name, arr, dtype=TensorProto.FLOAT):
    if dtype == TensorProto.FLOAT:
        return onnx.numpy_helper.from_array(np.asarray(arr, np.float32), name)
    if dtype == TensorProto.FLOAT16:
        return onnx.numpy_helper.from_array(np.asarray(arr, np.float16), name)
    # bfloat16: the top half of each float32, in raw_data
    bits = (np.asarray(arr, np.float32).view(np.uint32) >> 16).astype("<u2")
    return helper.make_tensor(name, TensorProto.BFLOAT16, list(np.shape(arr)), bits.tobytes(), raw=True)


def model(nodes, inits, features=4, opset=13, input_type=TensorProto.FLOAT, input_shape=None):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", input_type, input_shape or ["rows", features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="halfmap-corpus")


def helper_models():
    w = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=3).astype(np.float32)
    # MatMul + Add with float16 weight and bfloat16 bias, then Gelu as the opset-20 op, then Softmax.
    save("good_matmul_add_f16_bf16.onnx", model(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
         helper.make_node("Add", ["h", "b"], ["a"], name="fc_bias"),
         helper.make_node("Gelu", ["a"], ["g"], name="act", approximate="tanh"),
         helper.make_node("Softmax", ["g"], ["y"], name="probs", axis=1)],
        [tensor("W", w, TensorProto.FLOAT16), tensor("b", b, TensorProto.BFLOAT16)]))
    # Gemm without transB, Identity, Flatten, Reshape to (-1, 3).
    save("good_gemm_reshape.onnx", model(
        [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="gemm"),
         helper.make_node("Identity", ["h"], ["i"]),
         helper.make_node("Flatten", ["i"], ["f"], axis=1),
         helper.make_node("Reshape", ["f", "shape"], ["y"], name="reshape")],
        [tensor("W", w), tensor("b", b), onnx.numpy_helper.from_array(np.array([-1, 3], np.int64), "shape")]))

    ok = [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="gemm")]
    inits = [tensor("W", w), tensor("b", b)]
    save("bad_not_protobuf.onnx", b"\x08\x07\x12\xff\xff\xff\xff\x0f garbage")
    save("bad_empty.onnx", b"")
    save("bad_unsupported_op.onnx", model([helper.make_node("Conv", ["x", "W"], ["y"], name="conv1")], inits))
    save("bad_cycle.onnx", model(
        [helper.make_node("Relu", ["z"], ["h"], name="a"), helper.make_node("Relu", ["h"], ["z"], name="b"),
         helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="gemm")], inits))
    short = tensor("W", w)
    short.raw_data = short.raw_data[:-4]
    save("bad_raw_data_short.onnx", model(ok, [short, tensor("b", b)]))
    huge = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[1 << 31, 1 << 31, 1 << 31], raw_data=b"")
    save("bad_dims_overflow.onnx", model(ok, [huge, tensor("b", b)]))
    ext = tensor("W", w)
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    ext.external_data.add(key="location", value="weights.bin")
    save("bad_external_data.onnx", model(ok, [ext, tensor("b", b)]))
    save("bad_input_rank4.onnx", model(ok, inits, input_shape=["rows", 2, 2, 2]))
    save("bad_input_double.onnx", model(ok, inits, input_type=TensorProto.DOUBLE))
    save("bad_weight_shape.onnx", model(ok, [tensor("W", rng.normal(size=(5, 3))), tensor("b", b)]))
    save("bad_gemm_alpha.onnx", model(
        [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="gemm", alpha=2.0)], inits))
    save("bad_double_weight.onnx", model(
        ok, [onnx.numpy_helper.from_array(w.astype(np.float64), "W"), tensor("b", b)]))
    save("bad_f16_int32_data.onnx", model(
        ok, [TensorProto(name="W", data_type=TensorProto.FLOAT16, dims=[4, 3], int32_data=[70000] * 12), tensor("b", b)]))
    save("bad_written_twice.onnx", model(
        [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="gemm"),
         helper.make_node("Relu", ["x"], ["y"], name="again")], inits))
    # Div, Erf, Add, Mul, Mul with the wrong constant: looks like GELU, is not.
    c = lambda name, v: onnx.numpy_helper.from_array(np.array(v, np.float32), name)
    save("bad_fake_gelu.onnx", model(
        [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="gemm"),
         helper.make_node("Div", ["h", "two"], ["d"], name="div"),
         helper.make_node("Erf", ["d"], ["e"], name="erf"),
         helper.make_node("Add", ["e", "one"], ["p"], name="add"),
         helper.make_node("Mul", ["h", "p"], ["m"], name="mul"),
         helper.make_node("Mul", ["m", "half"], ["y"], name="mul_half")],
        inits + [c("two", 2.0), c("one", 1.0), c("half", 0.5)]))


if __name__ == "__main__":
    helper_models()
    torch_models()
    for p in sorted(out.iterdir()):
        print(p.name, p.stat().st_size)
