// The low-precision lowering (docs/graph.md, "Low-precision lowering";
// the contract: docs/semantics.md §10), internal to graph/passes/lower_int8/.
//
// A candidate is every f32 Convolution / GroupConvolution. It is lowered
// when, read from the convolution outwards:
//   activation  FakeQuantize(x, il, ih, ol, oh) levels=256 (per tensor or per
//               channel, one scale (oh − ol)/255 for every channel, zero point
//               −ol/scale an integer in [0, 255]), or DequantizeLinear(q u8/i8,
//               scale, [zp]) (per tensor, or per channel on axis 1 with one
//               scale; per-channel zero points need u8), or the dequantized
//               output of a convolution lowered before;
//   weights     Multiply(Convert(W) [− Convert(Z) | − Z], S) (either operand
//               order) or DequantizeLinear(W, S [, Z]) axis=0, W an i8/u8
//               Constant, S f32 per output channel, W − Z within s8;
//   output      through single consumers: [bias Add of a per-OC Constant or
//               DequantizeLinear(i32 Constant)] [per-channel Multiply / Add]
//               [Relu | PRelu | Clamp] [residual Add of another f32 tensor]
//               [Relu | Clamp], then FakeQuantize levels=256 or QuantizeLinear.
// It becomes QConvolution(q, W8 [, residual]) whose problem is
//   src u8/s8 with the zero point per tensor (stock) or per channel (legacy),
//   scales[oc] = s_act · s_w[oc], the bias, the chain as post-ops (eltwise,
//   scale_shift, prelu, add:full), and the output quantization as a
//   fq post-op (FakeQuantize) or linear / scale_shift + dst_zp (QuantizeLinear)
//   with an integer destination.
// A FakeQuantize output is replaced by its dequantization
// FakeQuantize(Convert(y, f32), qlo, qhi − 1/2, ol, oh) — the f32 values the
// graph had, level for level — and the next lowered convolution reads y itself; a QuantizeLinear
// output is y. Anything else stays as written, with the reason in its record.
//
// The files: match.cpp reads the patterns (the activation's, the weights' and
// the quantizations'), chain.cpp the post-op chain from the convolution to its
// output quantization, decide.cpp decides the problem, builds the node and
// keeps the records (lower_low_precision); after the candidates,
// pool_and_requantize.cpp moves MaxPool and requantizations onto the
// integers and fuse_dw.cpp fuses 1x1 + depthwise pairs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir/qconv_spec.h"
#include "qconv/graph.h"

namespace qconv::graph::int8 {

using detail::qconv_spec;

// The quantization of an activation: value = (q − zp[c]) · scale, q stored as `type`.
struct quant {
    node *q = nullptr; // the node holding the integers (may be created later)
    dtype type = dtype::u8;
    double scale = 0;
    std::vector<int32_t> zp; // 1 or C values (in the stored type's terms)
    // C values when the scale differs per channel (a DequantizeLinear axis=1
    // read by a convolution whose output channels each read one input
    // channel: a depthwise one), else empty and `scale` is every channel's.
    std::vector<double> scales;
    // A per-tensor FakeQuantize's output bounds (fq) or a QDQ pair's scale:
    // what a requantization must repeat to be the identity on the levels.
    bool fq = false;
    double lo = 0, hi = 0;
    bool same(const quant &o) const {
        return type == o.type && zp == o.zp && fq == o.fq && scales == o.scales &&
               (fq ? lo == o.lo && hi == o.hi : scale == o.scale);
    }
};

// ------------------------------------------------------- match.cpp: patterns
bool is_const_f32(const node *n);
// Values of a Constant broadcast against an NCHW tensor of C channels: 1
// value, or C values along the channel dim ([C,1,1], [1,C,1,1]; with
// allow_1d also [C]). Empty when it is neither.
// For a MatMul's [M,K] → [M,N] (rank2: the channel is the last dim) [C] and
// [1,C] are per channel too.
std::vector<double> per_channel(const node *c, int64_t C, bool rank2, bool allow_1d = false);
std::vector<float> expand(const std::vector<double> &v, int64_t C);
bool all_equal(const std::vector<double> &v);

// A FakeQuantize levels=256 as the quantization of C channels: one scale,
// integer zero points in [0, 255]. The stored type: s8 when per tensor with
// zero point 128, else u8. Empty string when it fits.
struct fq_info {
    std::vector<double> il, ih, ol, oh;
    quant qt;
    bool per_channel = false;
};
std::string analyze_fq(const node *f, int64_t C, bool rank2, fq_info *r);

// The same node, or Constants of one type holding the same values (a
// quantization's scale or zero point, per tensor or per channel).
bool same_constant(const node *a, const node *b);
// QuantizeLinear q and DequantizeLinear d take the same parameters (scale,
// zero point, axis when per channel).
bool same_qdq_params(const node *q, const node *d);

// One candidate at a time (visit): matching, the chain, the decision, the
// node. What it learns stays for the next candidates: the integers a lowered
// convolution's output holds, MaxPool / Concat made on integers, folded
// Constants.
class lowerer {
public:
    explicit lowerer(graph &g) : g_(g) {}

    rewrite_record visit(node *c);

private:
    // The output chain read from the convolution through single consumers,
    // as post-ops, up to the output quantization (docs/graph.md, the
    // pattern table).
    struct chain_walk {
        qconv_spec sp;
        node *t = nullptr; // the last node taken
        node *residual = nullptr;
        size_t residual_op = 0;
        std::string text;
        const node *out_q = nullptr; // the output FakeQuantize / QuantizeLinear
        // 0: start, 1: after bias / mul / add, 2: after an activation, 3: after
        // the residual, 4: after an activation after it
        int stage = 0;
        std::vector<float> ss_scale, ss_shift; // a pending scale_shift
        bool have_ss = false;
        void flush_ss() {
            if (!have_ss) return;
            sp.p.ops.push_back(post_op::scale_shift_op(ss_scale, ss_shift));
            have_ss = false;
        }
    };

    // match.cpp: the nodes it makes, Constants folded
    node *add(op k, std::vector<node *> in, attributes a, const std::string &id, const node *from);
    node *single_consumer(node *n) const;
    node *fconst(const std::vector<float> &v, const shape_t &s, const std::string &id);
    node *constant_of(node *x);
    static constexpr int64_t kFoldElems = 1 << 16; // a bias or a table, not weights

    // match.cpp: the quantization patterns
    static bool qdq_of(const node *a, quant *q);
    static bool channel_zp_of(const node *a, quant *q);
    static bool same_value(const node *x, const node *y) { return same_constant(x, y); }
    static bool same_params(const node *q, const node *d) { return same_qdq_params(q, d); }
    node *requantized_residual(node *q);
    node *requantized_activation(node *q);
    bool int8_of(node *a, quant *q);
    node *requantized_concat(node *cat, const quant &d);
    // match.cpp: the activation and the weights
    std::string activation(node *a, int64_t C, quant *q, const node **fq, bool per_channel_scales);
    std::string weights(node *w, const shape_t &ws, int64_t OC, std::vector<int8_t> *w8, std::vector<double> *sw);

    // chain.cpp: the chain from the convolution to its output quantization
    std::string walk_chain(node *c, int64_t OC, chain_walk &w);
    bool take_requantized_residual(node *u, chain_walk &w);
    void take_output(node *u, chain_walk &w);
    std::string take_op(node *u, int64_t OC, const shape_t &ys, chain_walk &w);
    std::string take_bias(node *u, node *other, int64_t OC, const shape_t &ys, chain_walk &w);
    std::string take_scale_shift(node *u, node *other, int64_t OC, const shape_t &ys, chain_walk &w);
    std::string output_quantization(chain_walk &w, int64_t OC, const shape_t &ys, dtype *dt, fq_info *of,
                                    std::string *out_usable);

    // decide.cpp: the problem and the node
    std::string describe(const node *c, conv_desc *d) const;
    void finish_problem(chain_walk &w, const quant &in, const std::vector<double> &sw, dtype dt);
    node *fq_source(quant &in, const node *in_fq);
    void build(node *c, chain_walk &w, quant &in, const node *in_fq, const std::vector<int8_t> &w8, dtype dt,
               const fq_info &of, const std::string &out_usable);
    std::string try_lower(node *c, bool *done);

    graph &g_;
    // Dequantized activations whose integers a node holds; the string says
    // why one cannot be a source ("" when it can).
    std::map<const node *, std::pair<quant, std::string>> known_;
    std::map<const node *, quant> passthrough_; // MaxPool / Concat made on the integers
    std::map<const node *, node *> folded_;     // constant_of's answers
    // While a MatMul is lowered: its per-channel constants are [C] or [1,C]
    // (per_channel's rank2).
    bool rank2_ = false;

public:
    std::map<const node *, std::string> origin_; // QConvolution → the convolution it lowers
};

// fuse_dw.cpp
void fuse_dw(graph &g, std::map<const node *, std::string> &origin, std::vector<rewrite_record> &records);
// pool_and_requantize.cpp
int pool_and_requantize_on_integers(graph &g);

} // namespace qconv::graph::int8
