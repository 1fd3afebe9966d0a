// Internal helpers of the graph layer: half-precision conversion, element
// packing (u4/i4 two per byte, element 2i in the low nibble of byte i), the
// deterministic generator behind random(...) constants, and error helpers.
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
int64_t type_min(etype t);
int64_t type_max(etype t);
// Rounds (half to even) and saturates a value into type t; floats: f16/bf16 rounding.
double to_type(etype t, double v);

// Element i of packed storage as double / writes element i.
double load(etype t, const uint8_t *base, int64_t i);
void store(etype t, uint8_t *base, int64_t i, double v);

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

std::string fmt_double(double v); // shortest text that parses back to the same double

// The whole of a regular file of at most `limit` bytes (graph/file_io.cpp): a
// directory ("is a directory, not <kind>"), a device or a pipe, a larger file
// ("is larger than <limit_text>") or a failed read is a qconv::error on the
// field "file" naming the path.
std::string read_regular_file(const std::string &path, int64_t limit, const std::string &limit_text,
                              const std::string &kind);

// Shape and type inference of every node as graph::infer(), except that a
// Constant without data yet (its generator not run) only has its shape
// checked: the text reader infers every shape before generating any data.
void infer_shapes(graph &g);

// dst = src (packed elements of type t, row-major dims `in`) with its dims
// permuted: dst's dims are in[perm[0]], in[perm[1]], ... (graph/tensor.cpp).
void permute(etype t, const uint8_t *src, const shape_t &in, const std::vector<int64_t> &perm, uint8_t *dst);

// The executor's evaluation of one node (graph/executor.cpp): what its
// compile-time folding computes for a node whose inputs are known. The
// low-precision lowering reads constant subgraphs (a bias or scale written as
// Convert → Subtract → Multiply of Constants) through it, so the values it
// fuses are the ones the graph as written uses.
void eval_node(const node &n, const std::vector<const tensor *> &in, tensor &o);

} // namespace qconv::graph::detail
