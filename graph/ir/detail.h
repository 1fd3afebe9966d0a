// The IR's internal helpers (graph/ir/): half-precision conversion, element
// packing (u4/i4 two per byte, element 2i in the low nibble of byte i), the
// deterministic generator behind random(...) constants, shape inference and
// the geometry of Slice, Pad and Resize (graph/ir/infer.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::detail {

uint16_t f32_to_f16(float f); // round to nearest even, saturates to inf
float f16_to_f32(uint16_t h);
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

// Range of an integer element type.
int64_t type_min(dtype t);
int64_t type_max(dtype t);
// Rounds (half to even) and saturates a value into type t; floats: f16/bf16 rounding.
double to_type(dtype t, double v);

// Element i of packed storage as double / writes element i.
double load(dtype t, const uint8_t *base, int64_t i);
void store(dtype t, uint8_t *base, int64_t i, double v);

// splitmix64: a portable generator (identical sequences on every platform).
struct rng {
    uint64_t s;
    explicit rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); } // [0,1)
    // Uniform in [lo, hi] (spans up to 2^64 − 1 computed in unsigned arithmetic).
    int64_t integer(int64_t lo, int64_t hi) {
        const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
        const uint64_t off = span ? next() % span : next();
        return static_cast<int64_t>(static_cast<uint64_t>(lo) + off);
    }
};

std::string fmt_double(double v);

// Throws qconv::error "<where>: <Op> '<id>': <what>" (graph/ir/infer.cpp).
[[noreturn]] void fail_node(const node &n,
                            const std::string &what); // shortest text that parses back to the same double

// Shape and type inference of every node as graph::infer(), except that a
// Constant without data yet (its generator not run) only has its shape
// checked: the text reader infers every shape before generating any data.
void infer_shapes(graph &g);

// The value of a Constant node that has its data: its bytes as a plain
// tensor of the node's type and shape (graph/ir/tensor.cpp).
tensor constant_value(const node &c);

// Row-major strides of a shape, and the strides of `in` broadcast
// (right-aligned, numpy) to `out`: 0 where `in` has size 1 (graph/ir/tensor.cpp).
std::vector<int64_t> strides_of(const shape_t &s);
std::vector<int64_t> bstrides(const shape_t &in, const shape_t &out);

// dst[b][j][i] = src[b][i][j] for a batch of rows x cols matrices of
// whole-byte elements of type t, in 16 x 16 tiles so that both sides move
// along cache lines (graph/ir/tensor.cpp).
void transpose_tiled(dtype t, const uint8_t *src, uint8_t *dst, int64_t batch, int64_t rows, int64_t cols);

// dst = src (packed elements of type t, row-major dims `in`) with its dims
// permuted: dst's dims are in[perm[0]], in[perm[1]], ... (graph/ir/tensor.cpp).
void permute(dtype t, const uint8_t *src, const shape_t &in, const std::vector<int64_t> &perm, uint8_t *dst);

// Slice (graph/ir/infer.cpp): per dim of the input `in`, the first index
// taken and the step, and the output shape; throws qconv::error naming the
// node for attributes that do not fit or an empty result.
struct slice_geometry {
    std::vector<int64_t> first, step;
    shape_t out;
};
slice_geometry slice_of(const node &n, const shape_t &in);
// Pad and Resize: the output shape of input shape `in`, the attributes
// checked (qconv::error naming the node).
shape_t pad_shape(const node &n, const shape_t &in);
shape_t resize_shape(const node &n, const shape_t &in);
} // namespace qconv::graph::detail
