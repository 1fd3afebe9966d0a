#!/usr/bin/python3
"""Writes the quantized test networks as ONNX files, from Debian packages only
(python3-onnx, python3-numpy; nothing is downloaded).

  scripts/make_models.py OUTDIR [--size=224] [--models=a,b,...] [--seed=1] [--calib=2]

Models (the CNNs: torchvision's topologies, random weights from a fixed seed):
  resnet50_qdq.onnx        ResNet-50 (v1.5: stride on the 3x3), QDQ
  mobilenet_v2_qdq.onnx    MobileNet v2 (width 1.0), QDQ
  mobilenet_v2_qdq_pc.onnx MobileNet v2 with the activations that feed each
                           depthwise convolution quantized per channel (u8,
                           QuantizeLinear/DequantizeLinear axis=1)
  resnet50_qdq_pc.onnx     ResNet-50 with the input and each bottleneck's first activation
                           per channel: one scale for the tensor, a zero point per
                           channel (the legacy per-channel zero point's use: the
                           convolution reading it sums over channels, so its scale
                           must be one; after a Relu every zero point is 0)
  resnet50_qdq_zp.onnx     ResNet-50 with 14 convolution outputs quantized before their Relu,
                           per channel with one scale (the widest channel's): the stem and
                           the first 1x1 of every bottleneck of stages 2-4. The zero points
                           are those of the values below 0, so they differ and are not 0;
                           the Relu follows the DequantizeLinear and is quantized again
                           with the same parameters (Conv -> Q/DQ axis=1 -> Relu -> Q/DQ ->
                           [MaxPool -> Q/DQ] -> Conv), as a quantizer that does not fuse
                           the activation writes it; 15 convolutions read them
  resnet50_qdq_cs.onnx     the same network and tensors with a scale and a zero point per
                           channel (cannot be one int8 convolution: no single source scale)
  resnet50_qdq_pt.onnx     the same network and tensors quantized per tensor (the time the
                           per-channel zero points are measured against)
  qlinear_conv.onnx        a small QLinearConv network (dense 3x3, depthwise 3x3,
                           pointwise 1x1; u8 activations, per-channel s8 weights)
  ffn_nbits.onnx           (only when named) a transformer FFN, x [1, tokens, 1024] →
                           1024→4096 → Gelu (erf form) → 4096→1024, u4 weights in blocks
                           of 128 with u4 zero points, as com.microsoft MatMulNBits
                           (accuracy_level 0) + Add
  ffn_dq21.onnx            (only when named) the same FFN and weights as opset-21 blocked
                           UINT4 DequantizeLinear + MatMul + Add, Gelu the opset-20 op

  scripts/make_models.py OUTDIR --models=ffn_nbits,ffn_dq21 [--reference --tokens=7]
  scripts/make_models.py --compare MODEL_BASE GOT.npy MAX_STEPS MAX_SHARE   (a CNN's output)
  scripts/make_models.py --compare-rel MODEL_BASE GOT.npy MAX_REL           (an FFN's output)

Statically calibrated the way ONNX Runtime's static quantizer does it (MinMax):
the float network runs in numpy on `--calib` random inputs, each quantized
tensor's range [min(0, lo), max(0, hi)] gives a u8 scale and zero point; the QDQ
layout is the one its QDQ format writes: QuantizeLinear → DequantizeLinear on
every activation (the graph input, each convolution's output after its Relu /
Relu6, residual Adds, pooling), weights as per-output-channel symmetric s8
initializers through DequantizeLinear axis=0 (zero point 0), biases as int32
through DequantizeLinear with scale x_scale·w_scale. The batch is 1, the input
[1, 3, size, size] named "input", the output f32 [1, 1000] named "output".
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


# ------------------------------------------------------------------ float net
class Net:
    """A float CNN as a list of layers, run in numpy and written as QDQ ONNX."""

    def __init__(self, rng):
        self.rng = rng
        self.layers = []  # dicts, in order; each has 'out' (a value name)
        self.n = 0

    def name(self, base):
        self.n += 1
        return "%s_%d" % (base, self.n)

    def conv(self, x, cin, cout, k, stride=1, groups=1, act="relu", gain=1.0):
        fan_in = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)).astype(np.float32)
        w *= np.float32(gain * np.sqrt(2.0 / fan_in))
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        out = self.name("conv")
        self.layers.append(dict(kind="conv", x=x, out=out, w=w, b=b, stride=stride,
                                pad=k // 2, groups=groups, act=act))
        return out

    def add(self, a, b, act="relu"):
        out = self.name("add")
        self.layers.append(dict(kind="add", x=a, y=b, out=out, act=act))
        return out

    def maxpool(self, x):
        out = self.name("maxpool")
        self.layers.append(dict(kind="maxpool", x=x, out=out))
        return out

    def head(self, x, cin, classes=1000):
        w = (self.rng.standard_normal((classes, cin)) * np.sqrt(1.0 / cin)).astype(np.float32)
        b = (self.rng.standard_normal(classes) * 0.05).astype(np.float32)
        self.layers.append(dict(kind="gap", x=x, out="pool"))
        self.layers.append(dict(kind="flatten", x="pool", out="flat"))
        self.layers.append(dict(kind="gemm", x="flat", out="logits", w=w, b=b))
        return "logits"


def resnet50(rng):
    net = Net(rng)
    x = net.conv("input", 3, 64, 7, stride=2)
    x = net.maxpool(x)
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = net.conv(x, cin, width, 1)
            y = net.conv(y, width, width, 3, stride=s)
            y = net.conv(y, width, width * 4, 1, act=None, gain=0.3)
            short = x if i > 0 else net.conv(x, cin, width * 4, 1, stride=s, act=None)
            x = net.add(y, short)
            cin = width * 4
    net.head(x, cin)
    return net


def mobilenet_v2(rng):
    net = Net(rng)
    x = net.conv("input", 3, 32, 3, stride=2, act="relu6")
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = net.conv(y, cin, hidden, 1, act="relu6")
            y = net.conv(y, hidden, hidden, 3, stride=stride, groups=hidden, act="relu6")
            y = net.conv(y, hidden, c, 1, act=None, gain=0.5)
            x = net.add(y, x, act=None) if stride == 1 and cin == c else y
            cin = c
    x = net.conv(x, cin, 1280, 1, act="relu6")
    net.head(x, 1280)
    return net


# ------------------------------------------------------------ numpy forward
def conv2d(x, w, b, stride, pad, groups, dt=np.float64):
    """x [C, H, W], w [OC, C/g, k, k] → [OC, OH, OW] (accumulated in dt)."""
    c, h, wd = x.shape
    oc, cg, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - k) // stride + 1
    ow = (wd + 2 * pad - k) // stride + 1
    st = xp.strides
    win = np.lib.stride_tricks.as_strided(
        xp, shape=(c, k, k, oh, ow), strides=(st[0], st[1], st[2], st[1] * stride, st[2] * stride))
    if groups == 1:
        cols = win.reshape(c * k * k, oh * ow)
        y = w.reshape(oc, -1).astype(dt) @ cols.astype(dt)
        y = y.reshape(oc, oh, ow)
    elif groups == c and cg == 1 and oc == c:
        y = np.einsum("cijhw,cij->chw", win.astype(dt), w[:, 0].astype(dt))
    else:
        raise ValueError("grouped convolution other than depthwise")
    return (y + b[:, None, None]).astype(np.float32)


def act(v, kind):
    if kind == "relu":
        return np.maximum(v, 0)
    if kind == "relu6":
        return np.clip(v, 0, 6)
    return v


def forward(net, x):
    """Runs the float net on x [3, H, W]; returns every value by name."""
    return forward_from(net, {"input": x}, net.layers)


def forward_from(net, vals, layers):
    vals = dict(vals)
    for L in layers:
        k = L["kind"]
        if k == "conv":
            v = conv2d(vals[L["x"]], L["w"], L["b"], L["stride"], L["pad"], L["groups"])
            if L.get("preact"):  # quantized before its activation (the _zp/_cs variants)
                vals[L["out"] + "_conv"] = v
                if "preact_q" in L:
                    v = fake_quantize(v, L["preact_q"])
            v = act(v, L["act"])
        elif k == "add":
            v = act(vals[L["x"]] + vals[L["y"]], L["act"])
        elif k == "maxpool":  # 3x3 stride 2 pad 1
            a = np.pad(vals[L["x"]], ((0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
            c, h, w = vals[L["x"]].shape
            oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
            v = np.full((c, oh, ow), -np.inf, np.float32)
            for i in range(3):
                for j in range(3):
                    v = np.maximum(v, a[:, i:i + 2 * oh:2, j:j + 2 * ow:2])
        elif k == "gap":
            v = vals[L["x"]].mean(axis=(1, 2), keepdims=True)
        elif k == "flatten":
            v = vals[L["x"]].reshape(-1)
        elif k == "gemm":
            v = L["w"] @ vals[L["x"]] + L["b"]
        vals[L["out"]] = v.astype(np.float32)
    return vals


def fake_quantize(v, params):
    """QuantizeLinear → DequantizeLinear in f32 (half to even, saturated to u8); per channel: axis 0
    of a [C, H, W] value (the model's axis 1)."""
    scale, zp, axis = params
    scale = np.asarray(scale, np.float32)
    zp = np.asarray(zp, np.float32)
    if axis is not None:
        scale, zp = scale.reshape(-1, 1, 1), zp.reshape(-1, 1, 1)
    q = np.clip(np.round(v.astype(np.float32) / scale) + zp, 0, 255).astype(np.float32)
    return ((q - zp) * scale).astype(np.float32)


def forward_qdq(net, wr, x):
    """The QDQ graph as written, in numpy: the float forward with the dequantized weights and
    biases and a QuantizeLinear → DequantizeLinear after every value that has one."""
    layers = []
    for L in net.layers:
        L = dict(L)
        if L["out"] in wr.deq:
            L["w"], L["b"] = wr.deq[L["out"]]
        layers.append(L)
    q = Net(None)
    q.layers = layers
    for L in layers:
        if L.get("preact"):
            L["preact_q"] = wr.qparams[L["out"] + "_conv"]
    vals = {"input": fake_quantize(x, wr.qparams["input"])}
    for L in layers:
        vals.update(forward_from(q, vals, [L]))
        if L["out"] in wr.qparams:
            vals[L["out"]] = fake_quantize(vals[L["out"]], wr.qparams[L["out"]])
    return vals["logits"]


# -------------------------------------------------------------- quantization
def u8_params(lo, hi):
    """ONNX Runtime's asymmetric u8 parameters of a range (per tensor or per channel)."""
    lo = np.minimum(np.asarray(lo, np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, np.float64), 0.0)
    scale = (hi - lo) / 255.0
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    zp = np.clip(np.round(-lo / scale), 0, 255).astype(np.uint8)
    return scale, zp


def s8_weights(w):
    """Symmetric per-output-channel s8 weights: scale max|w|/127, zero point 0."""
    m = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    scale = np.where(m == 0, 1.0, m / 127.0).astype(np.float32)
    shape = (-1,) + (1,) * (w.ndim - 1)
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


class Writer:
    def __init__(self, ranges, per_channel, shared_scale=False):
        self.nodes, self.inits = [], []
        self.shared_scale = shared_scale  # per channel: one scale, a zero point per channel
        self.ranges = ranges  # value → (lo, hi) per tensor or per channel arrays
        self.per_channel = per_channel  # values quantized per channel
        self.qparams = {}  # value → (scale, zp, axis or None)
        self.deq = {}  # layer → (weights, bias) as the DequantizeLinears give them (f32)

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def qdq(self, v, share=None):
        """QuantizeLinear → DequantizeLinear of value v; returns the dequantized name."""
        if share is not None:
            scale, zp, axis = self.qparams[share]
        else:
            lo, hi = self.ranges[v]
            axis = 1 if v in self.per_channel else None
            if axis is None:
                lo, hi = np.min(lo), np.max(hi)
            scale, zp = u8_params(lo, hi)
            if axis is not None and self.shared_scale:
                # The widest channel's scale for all; each channel's zero point
                # keeps its range inside 0..255.
                lo = np.minimum(np.asarray(lo, np.float64), 0.0)
                scale = np.full(len(zp), np.max(scale), np.float32)
                zp = np.clip(np.round(-lo / scale), 0, 255).astype(np.uint8)
            if axis is None:
                scale, zp = np.float32(scale), np.uint8(zp)
        self.qparams[v] = (scale, zp, axis)
        s = self.init(v + "_scale", np.asarray(scale, np.float32))
        z = self.init(v + "_zero_point", np.asarray(zp, np.uint8))
        kw = {} if axis is None else {"axis": axis}
        self.nodes.append(helper.make_node("QuantizeLinear", [v, s, z], [v + "_quantized"],
                                           name=v + "_QuantizeLinear", **kw))
        self.nodes.append(helper.make_node("DequantizeLinear", [v + "_quantized", s, z], [v + "_dq"],
                                           name=v + "_DequantizeLinear", **kw))
        return v + "_dq"

    def x_scale(self, v, depthwise=False):
        """The input scale in the bias's scale x_scale·w_scale: per channel for a depthwise
        convolution of a per-channel input; for another convolution of one, the largest
        (any scale represents the bias; ONNX Runtime never writes that case)."""
        scale, _, axis = self.qparams[v]
        if axis is None:
            return np.float32(scale)
        return np.asarray(scale, np.float32) if depthwise else np.float32(np.max(scale))

    def weights(self, base, w, b, xs):
        q, ws = s8_weights(w)
        wq = self.init(base + "_weight_quantized", q)
        wsn = self.init(base + "_weight_scale", ws)
        wz = self.init(base + "_weight_zero_point", np.zeros(len(ws), np.int8))
        self.nodes.append(helper.make_node("DequantizeLinear", [wq, wsn, wz], [base + "_weight"],
                                           name=base + "_weight_DequantizeLinear", axis=0))
        bs = (xs * ws).astype(np.float32)
        bq = np.clip(np.round(b.astype(np.float64) / bs), -2**31, 2**31 - 1).astype(np.int32)
        bqn = self.init(base + "_bias_quantized", bq)
        bsn = self.init(base + "_bias_scale", bs)
        bz = self.init(base + "_bias_zero_point", np.zeros(len(bs), np.int32))
        self.nodes.append(helper.make_node("DequantizeLinear", [bqn, bsn, bz], [base + "_bias"],
                                           name=base + "_bias_DequantizeLinear", axis=0))
        shape = (-1,) + (1,) * (w.ndim - 1)
        self.deq[base] = (q.astype(np.float32) * ws.reshape(shape), bq.astype(np.float32) * bs)
        return base + "_weight", base + "_bias"


def write_qdq(net, ranges, per_channel, size, path, shared_scale=False):
    wr = Writer(ranges, per_channel, shared_scale)
    dq = {"input": wr.qdq("input")}  # value → its dequantized name
    six = None
    for L in net.layers:
        k, out = L["kind"], L["out"]
        if k == "conv":
            x = dq[L["x"]]
            w, b = wr.weights(out, L["w"], L["b"], wr.x_scale(L["x"], depthwise=L["groups"] > 1))
            kk = L["w"].shape[2]
            p = L["pad"]
            y = out if L["act"] is None else out + "_conv"
            wr.nodes.append(helper.make_node("Conv", [x, w, b], [y], name=out, group=L["groups"],
                                             kernel_shape=[kk, kk], strides=[L["stride"]] * 2,
                                             pads=[p, p, p, p]))
            if L.get("preact"):  # Q/DQ before the activation; the activation's output shares it
                y = wr.qdq(y)
            if L["act"] == "relu":
                wr.nodes.append(helper.make_node("Relu", [y], [out], name=out + "_relu"))
            elif L["act"] == "relu6":
                if six is None:
                    six = (wr.init("relu6_min", np.float32(0)), wr.init("relu6_max", np.float32(6)))
                wr.nodes.append(helper.make_node("Clip", [y, six[0], six[1]], [out], name=out + "_relu6"))
            dq[out] = wr.qdq(out, share=out + "_conv" if L.get("preact") else None)
        elif k == "add":
            y = out if L["act"] is None else out + "_sum"
            wr.nodes.append(helper.make_node("Add", [dq[L["x"]], dq[L["y"]]], [y], name=out))
            if L["act"] == "relu":
                wr.nodes.append(helper.make_node("Relu", [y], [out], name=out + "_relu"))
            dq[out] = wr.qdq(out)
        elif k == "maxpool":
            wr.nodes.append(helper.make_node("MaxPool", [dq[L["x"]]], [out], name=out, kernel_shape=[3, 3],
                                             strides=[2, 2], pads=[1, 1, 1, 1]))
            dq[out] = wr.qdq(out, share=L["x"])  # MaxPool keeps its input's scale
        elif k == "gap":
            wr.nodes.append(helper.make_node("GlobalAveragePool", [dq[L["x"]]], [out], name=out))
            dq[out] = wr.qdq(out)
        elif k == "flatten":
            wr.nodes.append(helper.make_node("Flatten", [dq[L["x"]]], [out], name=out, axis=1))
            dq[out] = wr.qdq(out, share=L["x"])
        elif k == "gemm":
            w, b = wr.weights(out, L["w"], L["b"], wr.x_scale(L["x"]))
            wr.nodes.append(helper.make_node("Gemm", [dq[L["x"]], w, b], [out], name=out, transB=1))
            dq[out] = wr.qdq(out)
    wr.nodes.append(helper.make_node("Identity", [dq["logits"]], ["output"], name="output"))
    write_qdq.writer = wr
    graph = helper.make_graph(
        wr.nodes, os.path.splitext(os.path.basename(path))[0],
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], wr.inits)
    save(graph, path)


def save(graph, path):
    model = helper.make_model(graph, producer_name="qconv scripts/make_models.py",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, path)


def calibrate(net, size, count, rng):
    """Per-channel (axis 0 of [C, H, W]; one value for vectors) min and max of every value."""
    ranges = {}
    for _ in range(count):
        x = rng.standard_normal((3, size, size)).astype(np.float32)
        for name, v in forward(net, x).items():
            red = tuple(range(1, v.ndim))
            lo, hi = (v.min(axis=red), v.max(axis=red)) if v.ndim > 1 else (v.min(), v.max())
            if name in ranges:
                lo, hi = np.minimum(ranges[name][0], lo), np.maximum(ranges[name][1], hi)
            ranges[name] = (lo, hi)
    return ranges


def qlinear_conv(size, rng, path):
    """input → QuantizeLinear → QLinearConv 3x3 (3→16, stride 2) → QLinearConv depthwise 3x3 →
    QLinearConv 1x1 (16→24) → DequantizeLinear → output; ranges calibrated on the float net."""
    net = Net(rng)
    a = net.conv("input", 3, 16, 3, stride=2)
    b = net.conv(a, 16, 16, 3, groups=16)
    c = net.conv(b, 16, 24, 1, act=None)
    ranges = calibrate(net, size, 2, rng)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def params(v):
        lo, hi = ranges[v]
        s, z = u8_params(np.min(lo), np.max(hi))
        return init(v + "_scale", np.float32(s)), init(v + "_zero_point", np.uint8(z)), np.float32(s)

    xs, xz, xsv = params("input")
    nodes.append(helper.make_node("QuantizeLinear", ["input", xs, xz], ["input_quantized"]))
    cur, cur_s, cur_z, cur_sv = "input_quantized", xs, xz, xsv
    for L in net.layers:
        q, ws = s8_weights(L["w"])
        w = init(L["out"] + "_w", q)
        wsn = init(L["out"] + "_w_scale", ws)
        wz = init(L["out"] + "_w_zero_point", np.zeros(len(ws), np.int8))
        bq = np.round(L["b"].astype(np.float64) / (cur_sv * ws)).astype(np.int32)
        bn = init(L["out"] + "_b", bq)
        ys, yz, ysv = params(L["out"])  # the Relu is folded into the output range (min 0)
        k = L["w"].shape[2]
        p = L["pad"]
        nodes.append(helper.make_node(
            "QLinearConv", [cur, cur_s, cur_z, w, wsn, wz, ys, yz, bn], [L["out"] + "_quantized"],
            name=L["out"], group=L["groups"], kernel_shape=[k, k], strides=[L["stride"]] * 2, pads=[p] * 4))
        cur, cur_s, cur_z, cur_sv = L["out"] + "_quantized", ys, yz, ysv
    nodes.append(helper.make_node("DequantizeLinear", [cur, cur_s, cur_z], ["output"]))
    oh = (size + 2 - 3) // 2 + 1
    graph = helper.make_graph(
        nodes, "qlinear_conv", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 24, oh, oh])], inits)
    save(graph, path)


MODELS = ("resnet50_qdq", "resnet50_qdq_pc", "resnet50_qdq_zp", "resnet50_qdq_cs", "resnet50_qdq_pt", "mobilenet_v2_qdq",
          "mobilenet_v2_qdq_pc", "qlinear_conv")


# ------------------------------------------------------------ transformer FFN
def ffn_weights(rng, hidden=1024, inner=4096, block=128):
    """u4 weights [N, K] (0..15), one zero point (0..15) and scale per block of `block` along K,
    a bias per output; for X·W1 (hidden → inner) and X·W2 (inner → hidden)."""
    def layer(n, k):
        return dict(n=n, k=k, block=block,
                    q=rng.integers(0, 16, size=(n, k)).astype(np.uint8),
                    zp=rng.integers(0, 16, size=(n, k // block)).astype(np.uint8),
                    scale=rng.uniform(0.002, 0.02, size=(n, k // block)).astype(np.float32),
                    bias=rng.uniform(-0.1, 0.1, size=n).astype(np.float32))
    return layer(inner, hidden), layer(hidden, inner)


def pack4(v):
    """Two 4-bit values per byte, the first in the low nibble (ONNX's INT4/UINT4 and
    MatMulNBits' order); an odd count gets a 0 high nibble."""
    v = np.asarray(v, np.uint8).reshape(-1) & 0xF
    if v.size % 2:
        v = np.append(v, np.uint8(0))
    return (v[0::2] | (v[1::2] << 4)).astype(np.uint8)


def uint4_tensor(name, dims, values):
    """A UINT4 (21) initializer by hand: ONNX 1.12's Python enum predates it (the reader and
    ONNX Runtime take the number)."""
    t = TensorProto()
    t.name = name
    t.data_type = 21
    t.dims.extend(dims)
    t.raw_data = pack4(values).tobytes()
    return t


def ffn_dense_ref(x, L):
    """x [T, K] float64 → x · deq(W)ᵀ + bias in float64."""
    n, k, b = L["n"], L["k"], L["block"]
    w = (L["q"].astype(np.float64).reshape(n, k // b, b) - L["zp"][..., None]) * L["scale"][..., None]
    return x @ w.reshape(n, k).T + L["bias"]


def ffn_reference(layers, x):
    """The FFN in float64 on x [1, T, hidden]: dense → Gelu (erf) → dense."""
    import math
    h = ffn_dense_ref(x.reshape(-1, x.shape[-1]).astype(np.float64), layers[0])
    h = 0.5 * h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0)))
    return ffn_dense_ref(h, layers[1]).reshape(1, x.shape[1], -1).astype(np.float32)


def write_ffn(layers, kind, path):
    """kind "nbits": com.microsoft MatMulNBits (bits 4, block_size 128, accuracy_level 0) + Add of
    the bias, Gelu in its erf form (Div → Erf → Add → Mul → Mul, as a PyTorch export at opset 17
    writes it); kind "dq21": opset 21 blocked DequantizeLinear of UINT4 weights [K, N] (axis 0,
    block_size 128, UINT4 zero points, f32 scales [K/128, N]) → MatMul → Add, Gelu the opset-20 op."""
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def dense(p, x, L, out):
        n, k, b = L["n"], L["k"], L["block"]
        ng = k // b
        if kind == "nbits":
            qw = np.stack([pack4(r) for r in L["q"]]).reshape(n, ng, b // 2)
            rb = (ng + 1) // 2  # zero points packed per row: ceil(K/bs / 2) bytes
            zp = np.stack([pack4(r) for r in L["zp"]]).reshape(n * rb)
            ins = [x, init(p + ".qweight", qw), init(p + ".scales", L["scale"].reshape(-1)),
                   init(p + ".qzeros", zp)]
            nodes.append(helper.make_node("MatMulNBits", ins, [out + "_mm"], name=p + "/MatMulNBits",
                                          domain="com.microsoft", K=k, N=n, bits=4, block_size=b,
                                          accuracy_level=0))
        else:
            inits.append(uint4_tensor(p + ".weight_q", [k, n], L["q"].T))
            s = init(p + ".weight_scale", np.ascontiguousarray(L["scale"].T))
            inits.append(uint4_tensor(p + ".weight_zp", [ng, n], L["zp"].T))
            nodes.append(helper.make_node("DequantizeLinear", [p + ".weight_q", s, p + ".weight_zp"],
                                          [p + ".weight"], name=p + "/DequantizeLinear", axis=0, block_size=b))
            nodes.append(helper.make_node("MatMul", [x, p + ".weight"], [out + "_mm"], name=p + "/MatMul"))
        nodes.append(helper.make_node("Add", [out + "_mm", init(p + ".bias", L["bias"])], [out], name=p + "/Add"))

    dense("fc1", "x", layers[0], "h")
    if kind == "nbits":
        init("sqrt2", np.float32(np.sqrt(2.0)))
        init("one", np.float32(1.0))
        init("half", np.float32(0.5))
        nodes += [helper.make_node("Div", ["h", "sqrt2"], ["g_div"], name="act/Div"),
                  helper.make_node("Erf", ["g_div"], ["g_erf"], name="act/Erf"),
                  helper.make_node("Add", ["g_erf", "one"], ["g_add"], name="act/Add"),
                  helper.make_node("Mul", ["h", "g_add"], ["g_mul"], name="act/Mul"),
                  helper.make_node("Mul", ["g_mul", "half"], ["g"], name="act/Mul_1")]
    else:
        nodes.append(helper.make_node("Gelu", ["h"], ["g"], name="act/Gelu"))
    dense("fc2", "g", layers[1], "y")
    hidden = layers[0]["k"]
    graph = helper.make_graph(
        nodes, os.path.splitext(os.path.basename(path))[0],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "tokens", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "tokens", hidden])], inits)
    opsets = ([helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)] if kind == "nbits"
              else [helper.make_opsetid("", 21)])
    model = helper.make_model(graph, producer_name="qconv scripts/make_models.py", opset_imports=opsets)
    model.ir_version = 8 if kind == "nbits" else 10  # opset 21 and 4-bit types need IR 10
    onnx.save(model, path)  # no checker: ONNX 1.12's knows neither opset 21 nor MatMulNBits


FFN_MODELS = ("ffn_nbits", "ffn_dq21")


def compare(args):
    """--compare MODEL_BASE GOT.npy MAX_STEPS MAX_SHARE: the driver's output against the numpy
    reference; exit status 1 when more than MAX_SHARE of the elements differ or one by more
    than MAX_STEPS quantization steps."""
    base, got, max_steps, max_share = args[0], args[1], float(args[2]), float(args[3])
    want = np.load(base + ".expected.npy").astype(np.float64)
    have = np.load(got).astype(np.float64)
    step = float(np.load(base + ".step.npy"))
    if want.shape != have.shape:
        sys.exit("make_models: shapes differ: expected %s, got %s" % (want.shape, have.shape))
    d = np.abs(want - have) / step
    steps, share = float(d.max()), float(np.mean(d > 1e-3))
    print("make_models: against the numpy reference: max_steps=%.3g differ=%.4f%% (bounds %g steps, %g%%)"
          % (steps, 100 * share, max_steps, 100 * max_share))
    if steps > max_steps + 1e-3 or share > max_share:
        sys.exit(1)


def compare_rel(args):
    """--compare-rel MODEL_BASE GOT.npy MAX_REL: a float output (the FFNs') against the float64
    reference; exit status 1 when the largest difference exceeds MAX_REL times the largest
    |reference value|."""
    base, got, max_rel = args[0], args[1], float(args[2])
    want = np.load(base + ".expected.npy").astype(np.float64)
    have = np.load(got).astype(np.float64)
    if want.shape != have.shape:
        sys.exit("make_models: shapes differ: expected %s, got %s" % (want.shape, have.shape))
    rel = float(np.abs(want - have).max() / max(np.abs(want).max(), 1e-30))
    print("make_models: against the float64 reference: max_rel=%.3g (bound %g)" % (rel, max_rel))
    if not rel <= max_rel:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated, of: " + ", ".join(MODELS + FFN_MODELS) + " (default: all but the FFNs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--calib", type=int, default=2, help="calibration inputs (default 2)")
    ap.add_argument("--reference", action="store_true",
                    help="also write MODEL.input.npy and MODEL.expected.npy (the QDQ graph run in numpy on "
                         "that input) and MODEL.step.npy (the output's quantization step); for an FFN "
                         "MODEL.input.npy [1, --tokens, 1024] and MODEL.expected.npy (float64, as f32)")
    ap.add_argument("--tokens", type=int, default=7, help="the FFNs' --reference input tokens (default 7)")
    if len(sys.argv) > 1 and sys.argv[1] == "--compare":
        return compare(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "--compare-rel":
        return compare_rel(sys.argv[2:])
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for m in a.models.split(","):
        if m not in MODELS + FFN_MODELS:
            sys.exit("make_models: unknown model '%s' (%s)" % (m, ", ".join(MODELS + FFN_MODELS)))
        rng = np.random.default_rng(a.seed)
        path = os.path.join(a.outdir, m + ".onnx")
        if m in FFN_MODELS:  # the same weights in both spellings (same seed)
            layers = ffn_weights(rng)
            write_ffn(layers, m[len("ffn_"):], path)
            if a.reference:
                x = rng.uniform(-1, 1, size=(1, a.tokens, layers[0]["k"])).astype(np.float32)
                base = os.path.join(a.outdir, m)
                np.save(base + ".input.npy", x)
                np.save(base + ".expected.npy", ffn_reference(layers, x))
        elif m == "qlinear_conv":
            qlinear_conv(a.size, rng, path)
        else:
            net = resnet50(rng) if m.startswith("resnet50") else mobilenet_v2(rng)
            pc = set()
            if m.endswith("_zp") or m.endswith("_cs") or m.endswith("_pt"):
                # The stem and the first 1x1 of each bottleneck of stages 2-4 (the blocks
                # after the first 64-wide stage), quantized before their Relu.
                for L in net.layers:
                    if L["kind"] == "conv" and L["act"] == "relu" and (
                            L["x"] == "input" or (L["w"].shape[2] == 1 and L["w"].shape[0] >= 128)):
                        L["preact"] = True
                        if not m.endswith("_pt"):
                            pc.add(L["out"] + "_conv")
            ranges = calibrate(net, a.size, a.calib, rng)
            if m.endswith("_pc"):
                # MobileNet v2: the input of every depthwise convolution; ResNet-50: each
                # bottleneck's first 1x1 output (the input of its 3x3).
                for L in net.layers:
                    if L["kind"] != "conv":
                        continue
                    if (L["groups"] > 1) if m.startswith("mobilenet") else (L["w"].shape[2] == 3 and L["x"] != "input"):
                        pc.add(L["x"])
                if m.startswith("resnet50"):
                    # The image too: its channels' ranges differ below 0, so their zero points
                    # differ (after a Relu every zero point is 0); the stem gets the legacy one.
                    pc.add("input")
            write_qdq(net, ranges, pc, a.size, path, shared_scale=m.startswith("resnet50") and not m.endswith("_cs"))
            if a.reference:
                wr = write_qdq.writer
                x = rng.standard_normal((3, a.size, a.size)).astype(np.float32)
                base = os.path.join(a.outdir, m)
                np.save(base + ".input.npy", x[None])
                np.save(base + ".expected.npy", forward_qdq(net, wr, x)[None])
                np.save(base + ".step.npy", np.float32(wr.qparams["logits"][0]))
        print("make_models: wrote %s (%.1f MB)" % (path, os.path.getsize(path) / 1e6))


if __name__ == "__main__":
    main()
