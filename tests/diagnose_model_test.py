#!/usr/bin/python3
"""`halfmap diagnose --model` end to end (include/halfmap/diagnose_model.hpp), on networks built here with
onnx.helper (Debian's python3-onnx) and on the one PyTorch exported (tests/fuzz/corpus/onnx/), checked on --json:

  * PyTorch's MLP (Linear, LayerNorm, GELU both ways, ReLU, an RMS norm, Sigmoid, Tanh, Softmax) on its rows: ok;
  * a second dense layer whose outputs pass 65504: compute, that layer named, on an fp16 path; f32 and bf16 clear;
  * a LayerNorm whose fp16 variance overflows: compute on the f16 path only, its outputs collapsed to zero
    (f16_f32acc keeps the statistics in f32);
  * --batch 32 and 5 give the same numbers but the batch indices;
  * a NaN in a weight: data, naming the initializer;
  * one attention head whose q·kᵀ passes 65504 when 1/√d is applied after the product: compute, the head named,
    the fix moving the scale before it; with 1/√d on q first: ok; a causal head forward and backward under xent;
  * with --loss xent, PyTorch's MLP: every path's loss and each layer's gradients at 1, 2^15, 2^16;
  * --train: every scaler trains (growths on schedule) on a network whose gradients stay in range; on one whose
    fp16 forward overflows on some batches the fp16 paths' scalers collapse and bf16's trains;
  * gradients that underflow at S = 1 only: ok, with the no-loss-scaling warning naming the layer;
  * bad input (an unsupported op, a hostile file, features of the wrong width, seed-model options): exit 2, one
    sentence on stderr, nothing on stdout and no --out file.

    diagnose_model_test.py HALFMAP EMULATOR('|'-separated, may be empty) THREADS CORPUS DATA WORK
"""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

exe, emulator, threads, corpus, data, work = sys.argv[1:7]
corpus, data, work = pathlib.Path(corpus), pathlib.Path(data), pathlib.Path(work)
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
prefix = [e for e in emulator.split("|") if e]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(prefix + [exe, "diagnose", *map(str, args), "--threads", threads], capture_output=True,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def diagnose(model, x):
    rc, out, err = run("--model", model, "--features", x, "--json")
    check(rc == 0, f"{model}: exit {rc}: {err}")
    return json.loads(out) if rc == 0 else None


def save_model(name, nodes, inits, features):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="halfmap-test")
    path = work / f"{name}.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def t(name, a):
    return onnx.numpy_helper.from_array(np.asarray(a, np.float32), name)


def save_x(name, a):
    path = work / f"{name}.npy"
    np.save(path, np.asarray(a, np.float32))
    return path


def paths(report):
    return {p["path"]: p for p in report["paths"]}


def finite_modes(report):
    return {p["mode"] for p in report["paths"] if p["finite"]}


rng = np.random.default_rng(3)

# PyTorch's MLP on its own rows: every layer finite everywhere.
r = diagnose(corpus / "good_torch_mlp_opset17.onnx", data / "torch_mlp_x.npy")
if r:
    check(r["verdict"]["boundary"] == "ok", f"torch mlp: {r['verdict']}")
    check(len(r["model"]["layers"]) == 12, "torch mlp: 12 layers")
    check([l["kind"] for l in r["model"]["layers"]][:3] == ["dense", "layernorm", "gelu"], "torch mlp: kinds")
    check(all(p["finite"] for p in r["paths"]), "torch mlp: every path finite")
    base = r["paths"][0]
    check(base["baseline"] and base["mode"] == "f32", "torch mlp: the baseline first")

# Dense -> ReLU -> dense whose outputs reach ~1.6e5: past fp16's 65504, far inside bf16's range.
x = rng.normal(size=(256, 4)) * 2
w1 = np.abs(rng.normal(size=(4, 8)))
w2 = np.full((8, 8), 1500.0)
overflow = save_model("fc2_overflows", [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
    helper.make_node("Relu", ["h"], ["a"], name="act1"),
    helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2")],
    [t("w1", w1), t("b1", np.zeros(8)), t("w2", w2), t("b2", np.zeros(8))], 4)
r = diagnose(overflow, save_x("fc2_x", x))
if r:
    v = r["verdict"]
    check(v["boundary"] == "compute" and v["layer"] == "fc2", f"fc2_overflows: {v}")
    check(v["path"] is not None and v["path"].startswith("f16"), f"fc2_overflows: an fp16 path: {v}")
    check("f32" in finite_modes(r) and "bf16_f32acc" in finite_modes(r), "fc2_overflows: f32 and bf16 clear")
    for p in r["paths"]:
        fc1, fc2 = p["layers"][0], p["layers"][2]
        check(fc1["nonfinite"] == 0, f"fc2_overflows: fc1 finite on {p['path']}")
        if p["storage"] == "f16":
            check(fc2["nonfinite"] > 0, f"fc2_overflows: fc2 overflows on {p['path']}")
    base_fc2 = r["paths"][0]["layers"][2]
    check(base_fc2["max_abs"] > 65504, "fc2_overflows: the baseline's max |y| is past 65504")
    check("fc2" in v["fix"] and "float32" in v["fix"], f"fc2_overflows: the fix names the layer: {v['fix']}")

# Dense to 64 features of about ±200, then LayerNormalization: Σ(x - mean)² ≈ 64 · 200² overflows an fp16 sum,
# while every value and the normalised output fit.
x = rng.normal(size=(128, 4))
w = rng.choice([-1.0, 1.0], size=(4, 64)) * 100
ln = save_model("ln_variance", [
    helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="proj"),
    helper.make_node("LayerNormalization", ["h", "g", "beta"], ["y"], name="ln", epsilon=1e-5)],
    [t("w", w), t("b", np.zeros(64)), t("g", np.ones(64)), t("beta", np.zeros(64))], 4)
r = diagnose(ln, save_x("ln_x", x))
if r:
    v = r["verdict"]
    check(v["boundary"] == "compute" and v["layer"] == "ln", f"ln_variance: {v}")
    check(v["path"] is not None and v["path"].startswith("f16/"), f"ln_variance: on the f16 path: {v}")
    by_mode = {p["mode"]: p for p in r["paths"]}
    check(by_mode["f16"]["layers"][0]["nonfinite"] == 0, "ln_variance: the projection fits fp16")
    # fp16's Σ(x - mean)² is inf, 1/√inf = 0: every output collapses to β = 0, without an inf.
    check(by_mode["f16"]["layers"][1]["flush_share"] == 1.0, "ln_variance: the f16 LayerNorm's outputs are all zero")
    check("collapses to zero" in v["reason"], f"ln_variance: the reason says how: {v['reason']}")
    check(by_mode["f16_f32acc"]["finite"], "ln_variance: f16_f32acc keeps the statistics in f32")

# --all-paths runs the lower ISAs and the ref twins too; the verdict still names Keras mixed_float16's path where
# it crosses; --path puts one first, and one this CPU does not run is bad input.
rc, out_text, err = run("--model", overflow, "--features", work / "fc2_x.npy", "--all-paths", "--json")
check(rc == 0, f"--all-paths: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    names = [p["path"] for p in r["paths"]]
    check("f16_f32acc/ref" in names and "bf16_f32acc/ref" in names, f"--all-paths: the ref twins: {names}")
    keras = [p["path"] for p in r["paths"] if p["keras_like"]]
    check(r["verdict"]["path"] == keras[0], f"--all-paths: the verdict names the Keras path: {r['verdict']}")
rc, out_text, err = run("--model", overflow, "--features", work / "fc2_x.npy", "--path", "bf16_f32acc/ref", "--json")
check(rc == 0 and json.loads(out_text)["paths"][1]["path"] == "bf16_f32acc/ref", f"--path first: {rc} {err}")
rc, _, err = run("--model", overflow, "--features", work / "fc2_x.npy", "--path", "f16/nosuch")
check(rc == 2 and "--path f16/nosuch is not a low-precision path this CPU runs" in err, f"--path unknown: {rc} {err}")

# The forward runs in chunks of whole batches; every layer is row-wise, so --batch changes nothing but the batch
# indices (row // batch) of the first non-finite outputs.
def diagnose_batch(model, x, batch):
    rc, out, err = run("--model", model, "--features", x, "--json", "--batch", batch)
    check(rc == 0, f"{model} --batch {batch}: exit {rc}: {err}")
    return json.loads(out) if rc == 0 else None


a, b = diagnose_batch(overflow, work / "fc2_x.npy", 32), diagnose_batch(overflow, work / "fc2_x.npy", 5)
if a and b:
    for pa, pb in zip(a["paths"], b["paths"]):
        for la, lb in zip(pa["layers"], pb["layers"]):
            fa, fb = la.pop("first_nonfinite"), lb.pop("first_nonfinite")
            check(la == lb, f"--batch 32 vs 5: {pa['path']} {la['name']}")
            check((fa is None) == (fb is None), f"--batch: first non-finite on {pa['path']} {la['name']}")
            if fa and fb:
                check(fa["row"] == fb["row"] and fa["batch"] == fa["row"] // 32 and fb["batch"] == fb["row"] // 5,
                      f"--batch: batch indices {fa} {fb}")

# A NaN in a weight: the weights are bad, whatever the precision.
w2 = rng.normal(size=(8, 2))
w2[3, 1] = np.nan
bad_weight = save_model("nan_weight", [
    helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="fc1"),
    helper.make_node("Relu", ["h"], ["a"], name="act"),
    helper.make_node("Gemm", ["a", "fc2.weight"], ["y"], name="fc2")],
    [t("fc1.weight", rng.normal(size=(4, 8))), t("fc1.bias", np.zeros(8)), t("fc2.weight", w2)], 4)
r = diagnose(bad_weight, save_x("nan_x", rng.normal(size=(64, 4))))
if r:
    v = r["verdict"]
    check(v["boundary"] == "data" and "'fc2.weight'" in v["reason"], f"nan_weight: {v}")
    check([w for w in r["weights"] if w["name"] == "fc2.weight"][0]["nan"] == 1, "nan_weight: one NaN counted")

# With a loss: PyTorch's MLP under cross-entropy (its final Softmax is the loss's own), every path's loss and each
# layer's gradients at S = 1, 2^15, 2^16.
classes = work / "torch_classes.npy"
np.save(classes, rng.integers(0, 4, size=len(np.load(data / "torch_mlp_x.npy"))))
rc, out_text, err = run("--model", corpus / "good_torch_mlp_opset17.onnx", "--features", data / "torch_mlp_x.npy",
                        "--loss", "xent", "--labels", classes, "--json")
check(rc == 0, f"torch mlp xent: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    check(r["options"]["loss"] == "xent" and r["verdict"]["boundary"] == "ok", f"torch mlp xent: {r['verdict']}")
    base = r["paths"][0]
    check(base["loss"] is not None and 0 < base["loss"]["loss"] < 10, f"torch mlp xent: the f32 loss {base['loss']}")
    for p in r["paths"][1:]:
        check(abs(p["loss"]["loss"] - base["loss"]["loss"]) < 0.05, f"xent: {p['path']}'s loss near f32's")
        grads = {g["name"]: g for g in p["gradients"]}
        check(grads["/0/Gemm"]["params"] is not None and grads["/0/Gemm"]["input"] is None,
              "xent: the first layer has parameter gradients and no input gradient")
        check(grads["/11/Softmax"]["params"] is None and grads["/11/Softmax"]["input"] is None,
              "xent: the final softmax is the loss's own")
        check([d["scale"] for d in grads["/9/Gemm"]["params"]] == [1, 32768, 65536], "xent: the three scales")

# PyTorch's pre-norm residual blocks under cross-entropy: the residual Adds run forward and backward everywhere.
rc, out_text, err = run("--model", corpus / "good_torch_residual_opset17.onnx", "--features",
                        data / "torch_mlp_x.npy", "--loss", "xent", "--labels", save_x("cls3", np.arange(32) % 3),
                        "--json")
check(rc == 0, f"torch residual: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    check(r["verdict"]["boundary"] == "ok", f"torch residual: {r['verdict']}")
    check([l["kind"] for l in r["model"]["layers"]].count("add") == 2, "torch residual: two residual adds")
    for p in r["paths"][1:]:
        adds = [g for g in p["gradients"] if g["name"].startswith("/Add")]
        check(len(adds) == 2 and all(g["params"] is None and g["input"] for g in adds),
              f"torch residual: the adds have input gradients only on {p['path']}")

# Gradients that underflow without loss scaling: inputs of 3e-5 and labels 0 make dW ~ 1e-8, below fp16's
# smallest subnormal at S = 1, and representable at 2^15: ok, with the no-loss-scaling warning naming the layer.
rng_u = np.random.default_rng(5)
under = save_model("grad_underflow", [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
    helper.make_node("Relu", ["h"], ["a"], name="act"),
    helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2")],
    [t("w1", rng_u.normal(size=(4, 8))), t("b1", np.zeros(8)), t("w2", rng_u.normal(size=(8, 1))),
     t("b2", np.zeros(1))], 4)
ux = save_x("under_x", rng_u.normal(size=(512, 4)) * 3e-5)
rc, out_text, err = run("--model", under, "--features", ux, "--loss", "mse", "--labels",
                        save_x("under_y", np.zeros((512, 1))), "--json")
check(rc == 0, f"grad_underflow: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    n = r["no_loss_scaling"]
    check(r["verdict"]["boundary"] == "ok", f"grad_underflow: {r['verdict']}")
    check(n["warning"] is not None and f"layer '{n['layer']}'" in n["warning"], f"grad_underflow: {n}")
    keras = [p for p in r["paths"] if p["keras_like"]][0]
    shares = {g["name"]: g["params"] for g in keras["gradients"] if g["params"]}
    check(n["layer"] == max(shares, key=lambda k: shares[k][0]["underflow_share"]), "grad_underflow: the worst layer")
    check(shares[n["layer"]][0]["underflow_share"] > 0.5 and shares[n["layer"]][1]["underflow_share"] < 0.01,
          f"grad_underflow: underflows at 1, not at 2^15: {shares[n['layer']]}")
    check(any(n["warning"] == note for note in r["verdict"]["notes"]), "grad_underflow: the warning is a note")
    # The window: at S = 1 the layer underflows, so the network's window starts above 2^0, set by a layer with
    # parameters; each layer's own window lies within [2^0, 2^40]; bf16 has the whole range.
    w = keras["window"]
    check(w["batches"] == 8 and not w["empty"] and w["S_min_log2"] > 0, f"grad_underflow: window {w}")
    check(w["lower_layer"] in shares, f"grad_underflow: the lower end is set by a dense layer: {w}")
    per_layer = [g["window"] for g in keras["gradients"] if g["params"] or g["input"]]
    check(w["S_min_log2"] == max(x["S_min_log2"] for x in per_layer) and
          w["S_max_log2"] == min(x["S_max_log2"] for x in per_layer), "grad_underflow: the intersection")
    bf16 = [p for p in r["paths"] if p["storage"] == "bf16"][0]["window"]
    check((bf16["S_min_log2"], bf16["S_max_log2"], bf16["lower_layer"], bf16["upper_layer"]) == (0, 40, None, None),
          f"grad_underflow: bf16's window is the whole search, limited by no layer: {bf16}")

# One attention head on sequences of 16 tokens, q = k = 64·x (d = 16): |q·kᵀ| reaches about 2^17 on the diagonal.
# Scaled after the product (BERT's placement) the product itself overflows fp16 on every fp16 path: compute, the
# head named, the fix moving 1/√d before it; scaled before (PyTorch's MultiheadAttention) it peaks 2 binades lower,
# inside fp16: ok. f32 and bf16 clear both.
def save_attention(name, prescale, causal=False, tokens=16):
    f, d = 16, 16
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="attn/q"),
             helper.make_node("MatMul", ["x", "wk"], ["k"], name="attn/k"),
             helper.make_node("MatMul", ["x", "wv"], ["v"], name="attn/v"),
             helper.make_node("Transpose", ["k"], ["kt"], name="attn/kt", perm=[0, 2, 1])]
    if prescale:
        nodes += [helper.make_node("Div", ["q", "sqrt_d"], ["qs"], name="attn/scale"),
                  helper.make_node("MatMul", ["qs", "kt"], ["s"], name="attn/scores")]
    else:
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["t"], name="attn/scores"),
                  helper.make_node("Div", ["t", "sqrt_d"], ["s"], name="attn/scale")]
    inits = [t("wq", 64 * np.eye(f, d)), t("wk", 64 * np.eye(f, d)), t("wv", np.eye(f, d)),
             t("sqrt_d", np.sqrt(d)), t("wo", rng.normal(size=(d, 4)) / 4)]
    if causal:
        nodes.append(helper.make_node("Add", ["s", "mask"], ["sm"], name="attn/mask"))
        inits.append(t("mask", np.triu(np.full((tokens, tokens), -np.inf), 1)))
    nodes += [helper.make_node("Softmax", ["sm" if causal else "s"], ["p"], name="attn/softmax", axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["o"], name="attn/out"),
              helper.make_node("MatMul", ["o", "wo"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", tokens, f])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="halfmap-test")
    path = work / f"{name}.onnx"
    path.write_bytes(m.SerializeToString())
    return path


attn_x = save_x("attn_x", rng.normal(size=(64 * 16, 16)))  # 64 sequences of 16 tokens
post = diagnose(save_attention("attn_post", False), attn_x)
if post:
    v = post["verdict"]
    head = [l for l in post["model"]["layers"] if l["kind"] == "attention"]
    check(len(head) == 1 and head[0]["attention"] == {"scale": "postscale", "causal": False}, f"attn_post: {head}")
    check(post["model"]["seq"] == 16 and post["data"]["batches"] == 2, f"attn_post: 64 sequences in batches of 32")
    check(v["boundary"] == "compute" and v["layer"] == "attn", f"attn_post: {v}")
    check("q·kᵀ" in v["reason"] and "before q·kᵀ" in v["fix"], f"attn_post: the reason and fix: {v}")
    check({"f32", "bf16_f32acc"} <= finite_modes(post), "attn_post: f32 and bf16 clear")
    prod = post["paths"][0]["layers"][1]["product_max_abs"]
    check(65504 < prod < 4 * 65504, f"attn_post: the f32 product peaks past fp16's largest finite: {prod}")
pre = diagnose(save_attention("attn_pre", True), attn_x)
if pre:
    check(pre["verdict"]["boundary"] == "ok", f"attn_pre: {pre['verdict']}")
    prod = pre["paths"][0]["layers"][1]["product_max_abs"]
    check(prod < 65504 and abs(prod * 4 - post["paths"][0]["layers"][1]["product_max_abs"]) < 1e-3 * prod * 4,
          f"attn_pre: the product is the postscale one / √d: {prod}")
# A causal head of 64 tokens (the reader checks it on a probe of the first 32, its mask cut to their block) under
# cross-entropy on every token: forward and backward run.
rc, out_text, err = run("--model", save_attention("attn_causal", True, causal=True, tokens=64), "--features", attn_x,
                        "--loss", "xent", "--labels", save_x("attn_cls", np.arange(64 * 16) % 4), "--json")
check(rc == 0, f"attn_causal: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    check(r["model"]["layers"][1]["attention"]["causal"] and r["model"]["seq"] == 64, "attn_causal: read as causal")
    keras = [p for p in r["paths"] if p["keras_like"]][0]
    grads = {g["name"]: g for g in keras["gradients"]}
    check(grads["attn"]["params"] is None and grads["attn"]["input"], f"attn_causal: the head's input gradient")
    check(grads["attn/qkv"]["params"] is not None, "attn_causal: the projection's weight gradient")
# A token count that does not divide the rows, and attention read from a rank-2 input: exit 2 (below).
odd_x = save_x("attn_odd", rng.normal(size=(24, 16)))

# --train: the grad_underflow network trained from its weights. Its gradients stay finite up to 2^27 on every
# path, so no scaler skips a step and with --growth-interval 20 each doubles after steps 20, 40, 60, 80 and 100:
# 5 growths, 5 runs of 20 steps (the last growth comes after the final step), a final scale of 2^(initial + 5).
rc, out_text, err = run("--model", under, "--features", ux, "--loss", "mse", "--labels", work / "under_y.npy",
                        "--train", "100", "--growth-interval", "20", "--json")
check(rc == 0, f"--train: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    check(r["options"]["train"] == 100 and r["options"]["growth_interval"] == 20, f"--train: options {r['options']}")
    check(r["paths"][0]["simulations"] == [], "--train: the baseline has no simulation")
    for p in r["paths"][1:]:
        sims = p["simulations"]
        check([m["framework"] for m in sims] == ["keras", "pytorch"], f"--train: both scalers on {p['path']}")
        for m, initial in zip(sims, (15, 16)):
            check(m["outcome"] == "trains" and m["skipped"] == 0 and m["growths"] == 5 and len(m["runs"]) == 5 and
                  m["final_scale"] == 2.0 ** (initial + 5) and m["steps"] == 100,
                  f"--train: {p['path']} {m['framework']}: {m}")
            check(m["runs"][1] == {"scale": 2.0 ** (initial + 1), "first_step": 21, "last_step": 40},
                  f"--train: the second run {m['runs']}")
            check(m["final_loss"] <= r["paths"][0]["loss"]["loss"], f"--train: SGD lowers the f32 loss: {m}")
    check(any("dynamic loss scaling on" in n and "over 100 steps" in n for n in r["verdict"]["notes"]),
          f"--train: a note on the Keras path's scalers: {r['verdict']['notes']}")
# fc2 overflows fp16 on some batches: on the fp16 paths the scalers skip those steps and halve to below 1
# (collapses); bf16 trains without a skip. A tiny --lr keeps SGD from moving the weights out of range.
rc, out_text, err = run("--model", overflow, "--features", work / "fc2_x.npy", "--loss", "mse", "--labels",
                        save_x("fc2_y", np.zeros((256, 8))), "--train", "40", "--lr", "1e-12", "--json")
check(rc == 0, f"--train fc2: exit {rc}: {err}")
if rc == 0:
    r = json.loads(out_text)
    check(r["verdict"]["boundary"] == "compute", f"--train fc2: the forward's verdict comes first: {r['verdict']}")
    for p in r["paths"][1:]:
        outcomes = {m["outcome"] for m in p["simulations"]}
        skipped = min(m["skipped"] for m in p["simulations"])
        if p["storage"] == "f16":
            check(outcomes == {"collapses"} and skipped > 20, f"--train fc2: {p['path']} collapses: {p['simulations']}")
        else:
            check(outcomes == {"trains"} and skipped == 0, f"--train fc2: {p['path']} trains: {p['simulations']}")

# Bad input: exit 2, one sentence, nothing written.
good_x = save_x("good_x", rng.normal(size=(16, 4)))
out = work / "report.json"
for args, says in [
        (["--model", corpus / "bad_unsupported_op.onnx", "--features", good_x], "node 'conv1' (Conv) is not supported"),
        (["--model", corpus / "bad_raw_data_short.onnx", "--features", good_x], "holds 44 bytes of raw data"),
        (["--model", corpus / "bad_not_protobuf.onnx", "--features", good_x], "is not an ONNX model"),
        (["--model", work / "missing.onnx", "--features", good_x], "no such file"),
        (["--model", overflow, "--features", save_x("wide_x", np.zeros((4, 5)))], "takes 4 features per row"),
        (["--model", overflow, "--features", good_x, "--hidden", "8"], "--hidden applies to the seed model"),
        (["--model", overflow, "--features", good_x, "--labels", good_x], "--labels needs --loss mse or --loss xent"),
        (["--model", overflow, "--features", good_x, "--loss", "mse"], "--loss mse needs --labels"),
        (["--model", overflow, "--features", good_x, "--loss", "mse", "--labels", save_x("y1", np.zeros((16, 1)))],
         "compares the network's 8 outputs per row with the labels, which have 1 columns"),
        (["--model", overflow, "--features", good_x, "--loss", "xent", "--labels", save_x("c9", np.full(16, 9.0))],
         "label 9 of row 0 is not a class of the network's 8 outputs"),
        (["--model", overflow, "--features", good_x, "--loss", "hinge"], "--loss hinge: the losses are mse and xent"),
        (["--features", good_x, "--labels", good_x, "--loss", "mse"], "--loss applies to --model"),
        (["--features", good_x], "--labels is required"),
        (["--model", work / "attn_post.onnx", "--features", odd_x], "takes sequences of 16 tokens"),
        (["--model", corpus / "bad_attention_rank2.onnx", "--features", good_x], "attention needs sequences"),
        (["--model", overflow, "--features", good_x, "--train", "10"], "--train needs --loss mse or --loss xent"),
        (["--model", overflow, "--features", good_x, "--loss", "xent", "--labels", save_x("c0", np.zeros(16)),
          "--train", "0"], "--train must be between 1 and"),
        (["--model", overflow, "--features", good_x, "--lr", "0.1"], "--lr applies to --train with --model"),
        (["--features", good_x, "--labels", good_x, "--train", "10"], "--train applies to --model")]:
    rc, stdout, stderr = run(*args, "--out", out)
    check(rc == 2, f"{args}: exit {rc}, expected 2")
    check(stdout == "", f"{args}: nothing on stdout")
    check(says in stderr and stderr.count("\n") == 1, f"{args}: one sentence with '{says}': {stderr!r}")
    check(not out.exists(), f"{args}: no --out file")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("diagnose_model_test: every case passed")
