// ONNX test models (tests/support/onnx_models.h).
#include "tests/support/onnx_models.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace qconv::test::onnx_model {

builder::builder(int64_t opset, bool microsoft) {
    model.set_ir_version(opset >= 21 ? 10 : 8);
    model.set_producer_name("qconv-tests");
    auto *o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    if (microsoft) {
        auto *m = model.add_opset_import();
        m->set_domain("com.microsoft");
        m->set_version(1);
    }
    graph().set_name("test");
}

void builder::input(const std::string &name, int type, const std::vector<int64_t> &dims, const std::string &symbol) {
    auto *in = graph().add_input();
    in->set_name(name);
    auto *t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    auto *s = t->mutable_shape();
    for (int64_t d : dims) {
        auto *dim = s->add_dim();
        if (d < 0) dim->set_dim_param(symbol);
        else dim->set_dim_value(d);
    }
}

void builder::output(const std::string &name, int type) {
    auto *o = graph().add_output();
    o->set_name(name);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

::onnx::TensorProto &builder::init_f32(const std::string &name, const std::vector<int64_t> &dims,
                                       const std::vector<float> &v, bool raw) {
    auto *t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    if (raw) t->set_raw_data(std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4));
    else
        for (float f : v) t->add_float_data(f);
    return *t;
}

::onnx::TensorProto &builder::init_i64(const std::string &name, const std::vector<int64_t> &v) {
    auto *t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return *t;
}

::onnx::TensorProto &builder::init_raw(const std::string &name, int type, const std::vector<int64_t> &dims,
                                       const std::vector<uint8_t> &bytes) {
    auto *t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(bytes.begin(), bytes.end()));
    return *t;
}

::onnx::NodeProto &builder::node(const std::string &op, const std::vector<std::string> &in,
                                 const std::vector<std::string> &out, const std::string &name,
                                 const std::string &domain) {
    auto *n = graph().add_node();
    n->set_op_type(op);
    if (!name.empty()) n->set_name(name);
    if (!domain.empty()) n->set_domain(domain);
    for (const auto &i : in) n->add_input(i);
    for (const auto &o : out) n->add_output(o);
    return *n;
}

void builder::externalize(const std::string &file) {
    external_file_ = file;
    for (auto &t : *graph().mutable_initializer()) {
        if (!t.has_raw_data()) continue;
        while (external_blob_.size() % 16) external_blob_ += '\0'; // offsets aligned like ONNX's tools do
        const size_t offset = external_blob_.size();
        external_blob_ += t.raw_data();
        t.clear_raw_data();
        t.set_data_location(::onnx::TensorProto::EXTERNAL);
        auto add = [&](const char *k, const std::string &v) {
            auto *e = t.add_external_data();
            e->set_key(k);
            e->set_value(v);
        };
        add("location", file);
        add("offset", std::to_string(offset));
        add("length", std::to_string(external_blob_.size() - offset));
    }
}

std::string builder::bytes() const {
    std::string s;
    if (!model.SerializeToString(&s)) throw std::runtime_error("onnx_model: serialization failed");
    return s;
}

void builder::save(const std::string &path) const {
    std::ofstream(path, std::ios::binary) << bytes();
    if (!external_file_.empty()) {
        const auto slash = path.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
        std::ofstream(dir + "/" + external_file_, std::ios::binary) << external_blob_;
    }
}

void attr(::onnx::NodeProto &n, const std::string &name, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
}
void attr(::onnx::NodeProto &n, const std::string &name, float v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
}
void attr(::onnx::NodeProto &n, const std::string &name, const std::string &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
}
void attr(::onnx::NodeProto &n, const std::string &name, const std::vector<int64_t> &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
}

namespace {
uint64_t mix(uint64_t &s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
} // namespace

std::vector<float> uniform(uint64_t seed, size_t n, float lo, float hi) {
    std::vector<float> v(n);
    uint64_t s = seed * 7919 + 1;
    for (auto &x : v) x = lo + (hi - lo) * static_cast<float>((mix(s) >> 40) * (1.0 / 16777216.0));
    return v;
}
std::vector<int> integers(uint64_t seed, size_t n, int lo, int hi) {
    std::vector<int> v(n);
    uint64_t s = seed * 104729 + 3;
    for (auto &x : v) x = lo + static_cast<int>(mix(s) % static_cast<uint64_t>(hi - lo + 1));
    return v;
}
std::vector<uint8_t> pack4(const std::vector<int> &v) {
    std::vector<uint8_t> b((v.size() + 1) / 2, 0);
    for (size_t i = 0; i < v.size(); ++i) b[i / 2] |= static_cast<uint8_t>((v[i] & 0xF) << (4 * (i & 1)));
    return b;
}

ffn_weights make_ffn_weights(int64_t hidden, int64_t inner, int64_t block, uint64_t seed) {
    ffn_weights w;
    w.hidden = hidden;
    w.inner = inner;
    w.block = block;
    w.w1 = integers(seed + 1, inner * hidden, 0, 15);
    w.z1 = integers(seed + 2, inner * (hidden / block), 0, 15);
    w.s1 = uniform(seed + 3, inner * (hidden / block), 0.002f, 0.02f);
    w.b1 = uniform(seed + 4, inner, -0.1f, 0.1f);
    w.w2 = integers(seed + 5, hidden * inner, 0, 15);
    w.z2 = integers(seed + 6, hidden * (inner / block), 0, 15);
    w.s2 = uniform(seed + 7, hidden * (inner / block), 0.002f, 0.02f);
    w.b2 = uniform(seed + 8, hidden, -0.1f, 0.1f);
    return w;
}

builder ffn_matmulnbits(const ffn_weights &w, bool typed_zp) {
    builder b(17, true);
    const int64_t H = w.hidden, I = w.inner, bs = w.block;
    b.input("x", FLOAT, {1, -1, H}, "tokens");
    b.output("y");
    auto layer = [&](const std::string &p, const std::string &in, const std::string &out, int64_t N, int64_t K,
                     const std::vector<int> &q, const std::vector<int> &z, const std::vector<float> &s,
                     const std::vector<float> &bias, bool bias_input) {
        const int64_t NG = K / bs;
        b.init_raw(p + ".qweight", UINT8, {N, NG, bs / 2}, pack4(q));
        b.init_f32(p + ".scales", {N * NG}, s);
        if (typed_zp) {
            std::vector<float> zf(z.begin(), z.end());
            b.init_f32(p + ".qzeros", {N * NG}, zf);
        } else {
            // Packed per row: ceil(NG/2) bytes, block g in nibble g%2 of byte g/2.
            const int64_t rb = (NG + 1) / 2;
            std::vector<uint8_t> zb(N * rb, 0);
            for (int64_t n = 0; n < N; ++n)
                for (int64_t g = 0; g < NG; ++g)
                    zb[n * rb + g / 2] |= static_cast<uint8_t>(z[n * NG + g] << (4 * (g & 1)));
            b.init_raw(p + ".qzeros", UINT8, {N * rb}, zb);
        }
        b.init_f32(p + ".bias", {N}, bias);
        std::vector<std::string> ins = {in, p + ".qweight", p + ".scales", p + ".qzeros"};
        if (bias_input) ins.insert(ins.end(), {"", p + ".bias"});
        auto &n = b.node("MatMulNBits", ins, {bias_input ? out : out + "_nobias"}, p + "/MatMulNBits", "com.microsoft");
        attr(n, "K", K);
        attr(n, "N", N);
        attr(n, "bits", int64_t(4));
        attr(n, "block_size", bs);
        attr(n, "accuracy_level", int64_t(4));
        if (!bias_input) b.node("Add", {out + "_nobias", p + ".bias"}, {out}, p + "/Add");
    };
    layer("fc1", "x", "h", I, H, w.w1, w.z1, w.s1, w.b1, true);
    // Gelu, erf form: h·(1 + erf(h/√2))·0.5.
    b.init_f32("sqrt2", {}, {static_cast<float>(std::sqrt(2.0))});
    b.init_f32("one", {}, {1.f});
    b.init_f32("half", {}, {0.5f});
    b.node("Div", {"h", "sqrt2"}, {"g_div"}, "act/Div");
    b.node("Erf", {"g_div"}, {"g_erf"}, "act/Erf");
    b.node("Add", {"g_erf", "one"}, {"g_add"}, "act/Add");
    b.node("Mul", {"h", "g_add"}, {"g_mul"}, "act/Mul");
    b.node("Mul", {"g_mul", "half"}, {"g"}, "act/Mul_1");
    layer("fc2", "g", "y", H, I, w.w2, w.z2, w.s2, w.b2, false);
    return b;
}

builder ffn_dequantize(const ffn_weights &w) {
    builder b(21);
    const int64_t H = w.hidden, I = w.inner, bs = w.block;
    b.input("x", FLOAT, {1, -1, H}, "tokens");
    b.output("y");
    auto layer = [&](const std::string &p, const std::string &in, const std::string &out, int64_t N, int64_t K,
                     const std::vector<int> &q, const std::vector<int> &z, const std::vector<float> &s,
                     const std::vector<float> &bias) {
        const int64_t NG = K / bs;
        // ONNX MatMul weights are [K, N]: transpose the [N][K] values, blocks along axis 0.
        std::vector<int> qt(K * N), zt(NG * N);
        std::vector<float> st(NG * N);
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t k = 0; k < K; ++k) qt[k * N + n] = q[n * K + k];
            for (int64_t g = 0; g < NG; ++g) {
                zt[g * N + n] = z[n * NG + g];
                st[g * N + n] = s[n * NG + g];
            }
        }
        b.init_raw(p + ".weight_q", UINT4, {K, N}, pack4(qt));
        b.init_f32(p + ".weight_scale", {NG, N}, st);
        b.init_raw(p + ".weight_zp", UINT4, {NG, N}, pack4(zt));
        b.init_f32(p + ".bias", {N}, bias);
        auto &dq = b.node("DequantizeLinear", {p + ".weight_q", p + ".weight_scale", p + ".weight_zp"}, {p + ".weight"},
                          p + "/DequantizeLinear");
        attr(dq, "axis", int64_t(0));
        attr(dq, "block_size", bs);
        b.node("MatMul", {in, p + ".weight"}, {out + "_mm"}, p + "/MatMul");
        b.node("Add", {out + "_mm", p + ".bias"}, {out}, p + "/Add");
    };
    layer("fc1", "x", "h", I, H, w.w1, w.z1, w.s1, w.b1);
    b.node("Gelu", {"h"}, {"g"}, "act/Gelu");
    layer("fc2", "g", "y", H, I, w.w2, w.z2, w.s2, w.b2);
    return b;
}

std::vector<double> ffn_reference(const ffn_weights &w, const std::vector<float> &x, int64_t tokens) {
    const int64_t H = w.hidden, I = w.inner, bs = w.block;
    auto dense = [&](const std::vector<double> &in, int64_t N, int64_t K, const std::vector<int> &q,
                     const std::vector<int> &z, const std::vector<float> &s, const std::vector<float> &bias) {
        std::vector<double> out(tokens * N);
        const int64_t NG = K / bs;
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += in[t * K + k] * (double(q[n * K + k] - z[n * NG + k / bs]) * s[n * NG + k / bs]);
                out[t * N + n] = acc + bias[n];
            }
        return out;
    };
    std::vector<double> xd(x.begin(), x.end());
    auto h = dense(xd, I, H, w.w1, w.z1, w.s1, w.b1);
    for (auto &v : h) v = gelu(v);
    return dense(h, H, I, w.w2, w.z2, w.s2, w.b2);
}

namespace {
struct cnn_weights {
    std::vector<float> w1, b1, w2, w3, wg, cg;
};
cnn_weights cnn(uint64_t seed) {
    cnn_weights c;
    c.w1 = uniform(seed + 1, 8 * 4 * 9, -0.5f, 0.5f);
    c.b1 = uniform(seed + 2, 8, -0.2f, 0.2f);
    c.w2 = uniform(seed + 3, 8 * 4 * 9, -0.5f, 0.5f);
    c.w3 = uniform(seed + 4, 8 * 8, -0.5f, 0.5f);
    c.wg = uniform(seed + 5, 10 * 128, -0.2f, 0.2f);
    c.cg = uniform(seed + 6, 10, -1.f, 1.f);
    return c;
}
// NCHW convolution, batch 1, in double.
std::vector<double> conv(const std::vector<double> &x, int64_t C, int64_t H, int64_t W, const std::vector<float> &w,
                         int64_t OC, int64_t G, int64_t K, int64_t stride, int64_t pt, int64_t pl, int64_t OH,
                         int64_t OW) {
    std::vector<double> y(OC * OH * OW, 0.0);
    const int64_t icg = C / G, ocg = OC / G;
    for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                double acc = 0;
                const int64_t g = oc / ocg;
                for (int64_t ic = 0; ic < icg; ++ic)
                    for (int64_t kh = 0; kh < K; ++kh)
                        for (int64_t kw = 0; kw < K; ++kw) {
                            const int64_t ih = oh * stride - pt + kh, iw = ow * stride - pl + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            acc += x[((g * icg + ic) * H + ih) * W + iw] * w[((oc * icg + ic) * K + kh) * K + kw];
                        }
                y[(oc * OH + oh) * OW + ow] = acc;
            }
    return y;
}
} // namespace

builder small_cnn(uint64_t seed) {
    const cnn_weights c = cnn(seed);
    builder b(13);
    b.input("x", FLOAT, {1, 4, 8, 8});
    b.output("y");
    b.init_f32("conv1.weight", {8, 4, 3, 3}, c.w1);
    b.init_f32("conv1.bias", {8}, c.b1, false); // a typed field, not raw_data
    b.init_f32("conv2.weight", {8, 4, 3, 3}, c.w2);
    b.init_f32("conv3.weight", {8, 8, 1, 1}, c.w3);
    b.init_i64("flat_shape", {1, -1});
    b.init_f32("fc.weight", {10, 128}, c.wg);
    b.init_f32("fc.bias", {10}, c.cg);
    auto &c1 = b.node("Conv", {"x", "conv1.weight", "conv1.bias"}, {"c1"}, "conv1");
    attr(c1, "pads", std::vector<int64_t>{1, 1, 1, 1});
    attr(c1, "kernel_shape", std::vector<int64_t>{3, 3});
    b.node("Relu", {"c1"}, {"r1"}, "relu1");
    auto &c2 = b.node("Conv", {"r1", "conv2.weight"}, {"c2"}, "conv2");
    attr(c2, "group", int64_t(2));
    attr(c2, "strides", std::vector<int64_t>{2, 2});
    attr(c2, "auto_pad", std::string("SAME_UPPER"));
    auto &c3 = b.node("Conv", {"c1", "conv3.weight"}, {"c3"}, "conv3");
    attr(c3, "strides", std::vector<int64_t>{2, 2});
    b.node("Add", {"c2", "c3"}, {"sum"}, "add");
    b.node("Reshape", {"sum", "flat_shape"}, {"flat"}, "flatten");
    auto &g = b.node("Gemm", {"flat", "fc.weight", "fc.bias"}, {"fc"}, "fc");
    attr(g, "transB", int64_t(1));
    attr(g, "alpha", 0.5f);
    attr(g, "beta", 2.f);
    auto &k = b.node("Constant", {}, {"two"}, "two");
    attr(k, "value_float", 2.f);
    b.node("Mul", {"fc", "two"}, {"y"}, "scale");
    return b;
}

std::vector<double> small_cnn_reference(uint64_t seed, const std::vector<float> &x) {
    const cnn_weights c = cnn(seed);
    std::vector<double> xd(x.begin(), x.end());
    auto c1 = conv(xd, 4, 8, 8, c.w1, 8, 1, 3, 1, 1, 1, 8, 8);
    for (int64_t oc = 0; oc < 8; ++oc)
        for (int64_t i = 0; i < 64; ++i) c1[oc * 64 + i] += c.b1[oc];
    std::vector<double> r1(c1);
    for (auto &v : r1) v = std::max(v, 0.0);
    // SAME_UPPER, 8 → 4 with stride 2 and a 3x3 kernel: 1 pad at the end, none at the start.
    const auto c2 = conv(r1, 8, 8, 8, c.w2, 8, 2, 3, 2, 0, 0, 4, 4);
    const auto c3 = conv(c1, 8, 8, 8, c.w3, 8, 1, 1, 2, 0, 0, 4, 4);
    std::vector<double> y(10);
    for (int64_t n = 0; n < 10; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < 128; ++k) acc += (c2[k] + c3[k]) * c.wg[n * 128 + k];
        y[n] = 2.0 * (0.5 * acc + 2.0 * c.cg[n]);
    }
    return y;
}

} // namespace qconv::test::onnx_model
