// Table lookups in a row composed into one (compose_lookup_tables,
// graph/passes/compose_tables.cpp): LookupTable graphs written directly in the
// text format, their tables generated here — unary after unary (per tensor,
// per channel [C,256] after or before per tensor, both per channel), unary
// after binary (65536), a unary table into input 0 or input 1 of a binary one
// (input 1 broadcast), a chain of three, i8 tables between u8 ones. Each
// checks the pairs composed, the LookupTable nodes left and that the outputs
// equal the graph before bit for bit for random u8 inputs at threads 1 and 2.
// Pairs that must not compose: the inner table read by two tables, or by a
// Result too, or by both inputs of one binary table; a per-channel table next
// to a binary one; binary after binary. And run_passes: an island's table and
// a same-type requantization's table after it, composed into one.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "tests/support/graph_texts.h"

using namespace qconv::graph;

namespace {

// Deterministic bytes (splitmix64).
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// `Constant <type>[<shape>] [...]` of n table entries from `seed`.
std::string table(const std::string &id, const std::string &type, const std::string &shape, int n, uint64_t seed) {
    std::string v;
    v.reserve(static_cast<size_t>(n) * 4);
    for (int i = 0; i < n; ++i) {
        const int b = static_cast<int>(mix(seed * 1000003u + static_cast<uint64_t>(i)) & 255);
        v += (i ? "," : "") + std::to_string(type == "i8" ? b - 128 : b);
    }
    return id + " = Constant " + type + shape + " [" + v + "]\n";
}
std::string unary_table(const std::string &id, uint64_t seed, const std::string &type = "u8") {
    return table(id, type, "[256]", 256, seed);
}
std::string channel_table(const std::string &id, int C, uint64_t seed) {
    return table(id, "u8", "[" + std::to_string(C) + ",256]", C * 256, seed);
}
std::string binary_table(const std::string &id, uint64_t seed) { return table(id, "u8", "[65536]", 65536, seed); }

struct compose_case {
    const char *name;
    std::string text;
    int composed;    // compose_lookup_tables' count
    int tables;      // LookupTable nodes after
    int64_t entries; // the last LookupTable's table elements after (0: not checked)
};

void PrintTo(const compose_case &c, std::ostream *os) { *os << c.name; }

int lookup_tables(const graph &g) {
    int n = 0;
    for (const auto &p : g.nodes()) n += p->kind == op::LookupTable;
    return n;
}

class GraphComposeTables : public ::testing::TestWithParam<compose_case> {};

TEST_P(GraphComposeTables, OneTableWithTheSameBytes) {
    const compose_case &c = GetParam();
    const auto g = parse(c.text);
    auto l = g->clone();
    EXPECT_EQ(compose_lookup_tables(*l), c.composed);
    EXPECT_EQ(lookup_tables(*l), c.tables);
    if (c.entries) {
        const node *last = nullptr;
        for (const node *n : l->topo_order())
            if (n->kind == op::LookupTable) last = n;
        ASSERT_NE(last, nullptr);
        EXPECT_EQ(elems_of(last->inputs.back()->out_shape), c.entries);
    }
    // The text of the composed graph reads back (the tables written out).
    const auto back = parse(to_text(*l));
    for (uint64_t seed : {1u, 2u, 3u})
        for (int threads : {1, 2}) {
            const auto in = random_inputs(*g, seed);
            const auto want = compiled_graph(*g, threads).run(in);
            const auto got = compiled_graph(*l, threads).run(in);
            const auto again = compiled_graph(*back, threads).run(in);
            ASSERT_EQ(want.size(), got.size());
            for (size_t k = 0; k < want.size(); ++k) {
                EXPECT_EQ(want[k].type, got[k].type);
                ASSERT_EQ(want[k].shape, got[k].shape);
                EXPECT_EQ(want[k].values(), got[k].values())
                    << "output " << k << " seed " << seed << " threads " << threads;
                EXPECT_EQ(again[k].values(), got[k].values()) << "after the text round trip";
            }
        }
}

const std::string kX = "a = Parameter u8[2,4,5,6]\n";

std::vector<compose_case> cases() {
    std::vector<compose_case> r;
    r.push_back({"unary_unary",
                 kX + unary_table("t1", 1) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 2) +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 256});
    r.push_back({"per_channel_then_per_tensor",
                 kX + channel_table("t1", 4, 3) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 4) +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 4 * 256});
    r.push_back({"per_tensor_then_per_channel",
                 kX + unary_table("t1", 5) + "l1 = LookupTable(a, t1)\n" + channel_table("t2", 4, 6) +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 4 * 256});
    r.push_back({"both_per_channel",
                 kX + channel_table("t1", 4, 7) + "l1 = LookupTable(a, t1)\n" + channel_table("t2", 4, 8) +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 4 * 256});
    // u8 → i8 → u8: the i8 bytes index the second table as unsigned.
    r.push_back({"i8_between",
                 kX + unary_table("t1", 9, "i8") + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 10) +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 256});
    r.push_back({"unary_to_i8",
                 kX + unary_table("t1", 11) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 12, "i8") +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 256});
    r.push_back({"binary_then_unary",
                 kX + "b = Parameter u8[2,4,5,6]\n" + binary_table("t1", 13) + "l1 = LookupTable(a, b, t1)\n" +
                     unary_table("t2", 14) + "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 1, 1, 65536});
    r.push_back({"unary_into_input0",
                 kX + "b = Parameter u8[2,4,5,6]\n" + unary_table("t1", 15) + "l1 = LookupTable(a, t1)\n" +
                     binary_table("t2", 16) + "l2 = LookupTable(l1, b, t2)\no = Result(l2)\n",
                 1, 1, 65536});
    r.push_back({"unary_into_input1",
                 kX + "b = Parameter u8[2,4,5,6]\n" + unary_table("t1", 17) + "l1 = LookupTable(b, t1)\n" +
                     binary_table("t2", 18) + "l2 = LookupTable(a, l1, t2)\no = Result(l2)\n",
                 1, 1, 65536});
    // Input 1 broadcast ([N, C, 1, 1], a squeeze-excite scale) through its table.
    r.push_back({"unary_into_broadcast_input1",
                 kX + "b = Parameter u8[2,4,1,1]\n" + unary_table("t1", 19) + "l1 = LookupTable(b, t1)\n" +
                     binary_table("t2", 20) + "l2 = LookupTable(a, l1, t2)\no = Result(l2)\n",
                 1, 1, 65536});
    r.push_back({"chain_of_three",
                 kX + unary_table("t1", 21) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 22) +
                     "l2 = LookupTable(l1, t2)\n" + unary_table("t3", 23) +
                     "l3 = LookupTable(l2, t3)\no = Result(l3)\n",
                 2, 1, 256});
    r.push_back({"chain_of_three_per_channel_middle",
                 kX + unary_table("t1", 24) + "l1 = LookupTable(a, t1)\n" + channel_table("t2", 4, 25) +
                     "l2 = LookupTable(l1, t2)\n" + unary_table("t3", 26) +
                     "l3 = LookupTable(l2, t3)\no = Result(l3)\n",
                 2, 1, 4 * 256});
    // binary → unary → unary: one table of 65536.
    r.push_back({"binary_then_two_unary",
                 kX + "b = Parameter u8[2,4,5,6]\n" + binary_table("t1", 27) + "l1 = LookupTable(a, b, t1)\n" +
                     unary_table("t2", 28) + "l2 = LookupTable(l1, t2)\n" + unary_table("t3", 29) +
                     "l3 = LookupTable(l2, t3)\no = Result(l3)\n",
                 2, 1, 65536});
    // The middle of a chain is also a Result: the first pair composes, the second does not.
    r.push_back({"chain_middle_is_a_result",
                 kX + unary_table("t1", 30) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 31) +
                     "l2 = LookupTable(l1, t2)\n" + unary_table("t3", 32) +
                     "l3 = LookupTable(l2, t3)\no = Result(l3)\no2 = Result(l2)\n",
                 1, 2, 256});
    // ------------------------------------------------------ not composed
    r.push_back({"inner_read_twice",
                 kX + unary_table("t1", 33) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 34) +
                     "l2 = LookupTable(l1, t2)\n" + unary_table("t3", 35) +
                     "l3 = LookupTable(l1, t3)\no = Result(l2)\no2 = Result(l3)\n",
                 0, 3, 0});
    r.push_back({"inner_is_a_result",
                 kX + unary_table("t1", 36) + "l1 = LookupTable(a, t1)\n" + unary_table("t2", 37) +
                     "l2 = LookupTable(l1, t2)\no = Result(l2)\no2 = Result(l1)\n",
                 0, 2, 0});
    r.push_back({"inner_on_both_binary_inputs",
                 kX + unary_table("t1", 38) + "l1 = LookupTable(a, t1)\n" + binary_table("t2", 39) +
                     "l2 = LookupTable(l1, l1, t2)\no = Result(l2)\n",
                 0, 2, 0});
    r.push_back({"per_channel_into_binary",
                 kX + "b = Parameter u8[2,4,5,6]\n" + channel_table("t1", 4, 40) + "l1 = LookupTable(a, t1)\n" +
                     binary_table("t2", 41) + "l2 = LookupTable(l1, b, t2)\no = Result(l2)\n",
                 0, 2, 0});
    r.push_back({"binary_into_per_channel",
                 kX + "b = Parameter u8[2,4,5,6]\n" + binary_table("t1", 42) + "l1 = LookupTable(a, b, t1)\n" +
                     channel_table("t2", 4, 43) + "l2 = LookupTable(l1, t2)\no = Result(l2)\n",
                 0, 2, 0});
    r.push_back({"binary_into_binary",
                 kX + "b = Parameter u8[2,4,5,6]\n" + binary_table("t1", 44) + "l1 = LookupTable(a, b, t1)\n" +
                     binary_table("t2", 45) + "l2 = LookupTable(l1, b, t2)\no = Result(l2)\n",
                 0, 2, 0});
    return r;
}

INSTANTIATE_TEST_SUITE_P(Tables, GraphComposeTables, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return std::string(info.param.name); });

// A binary table whose inputs both come from unary tables: both compose into
// it in one run, one after the other, leaving one table with the same bytes.
TEST(ComposeLookupTables, BothBinaryInputsFromUnaryTables) {
    const auto g = parse(kX + "b = Parameter u8[2,4,5,6]\n" + unary_table("t1", 46) + "l1 = LookupTable(a, t1)\n" +
                         unary_table("t2", 47) + "l2 = LookupTable(b, t2)\n" + binary_table("t3", 48) +
                         "l3 = LookupTable(l1, l2, t3)\no = Result(l3)\n");
    auto l = g->clone();
    const int n = compose_lookup_tables(*l);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(lookup_tables(*l), 1);
    for (int threads : {1, 2}) {
        const auto in = random_inputs(*g, 5);
        EXPECT_EQ(compiled_graph(*l, threads).run(in)[0].values(), compiled_graph(*g, threads).run(in)[0].values());
    }
}

// Nothing to compose: the graph is left as it is.
TEST(ComposeLookupTables, NoTablesNoChange) {
    auto g = parse("a = Parameter u8[4]\no = Result(a)\n");
    const std::string before = to_text(*g);
    EXPECT_EQ(compose_lookup_tables(*g), 0);
    EXPECT_EQ(to_text(*g), before);
}

// The graph before and after run_passes: `tables` LookupTables of `entries`
// elements (the first) left, the same output bits at threads 1 and 2.
void expect_passes_keep_bits(const std::string &text, int tables, int64_t entries) {
    const auto g = parse(text);
    auto l = g->clone();
    run_passes(*l);
    EXPECT_EQ(lookup_tables(*l), tables) << to_text(*l);
    for (const auto &n : l->nodes())
        if (n->kind == op::LookupTable) {
            EXPECT_EQ(elems_of(n->inputs.back()->out_shape), entries);
        }
    for (uint64_t seed : {1u, 2u})
        for (int threads : {1, 2}) {
            const auto in = random_inputs(*g, seed);
            EXPECT_EQ(compiled_graph(*l, threads).run(in)[0].values(), compiled_graph(*g, threads).run(in)[0].values())
                << "seed " << seed << " threads " << threads;
        }
}

// run_passes on a QDQ graph: a Sigmoid island becomes a table and the
// requantization after it (Q(DQ(x)), same type, other parameters) another
// one; the two compose into one, and the output keeps the graph's bits.
TEST(ComposeLookupTables, IslandAndRequantizationAsOneTable) {
    expect_passes_keep_bits(R"(
x   = Parameter f32[2,6,5,7]
s   = Constant f32[] [0.05]
z   = Constant u8[] [120]
xq  = QuantizeLinear(x, s, z)
xd  = DequantizeLinear(xq, s, z)
sg  = Sigmoid(xd)
s2  = Constant f32[] [0.00390625]
z2  = Constant u8[] [0]
yq  = QuantizeLinear(sg, s2, z2)
yd  = DequantizeLinear(yq, s2, z2)
s3  = Constant f32[] [0.003]
z3  = Constant u8[] [10]
rq  = QuantizeLinear(yd, s3, z3)
rd  = DequantizeLinear(rq, s3, z3)
out = Result(rd)
)",
                            1, 256);
}

// The same on an int8 convolution's u8 output (NHWC): a per-channel bias
// Add island (one table per channel) and a requantization after it compose
// into one per-channel table, looked up on the NHWC values.
TEST(ComposeLookupTables, PerChannelIslandOnNhwcValues) {
    expect_passes_keep_bits(qconv::test::int8_conv_head("2,8,6,5") + R"(y1q   = QuantizeLinear(c1, s, z)
y1d   = DequantizeLinear(y1q, s, z)
b     = Constant f32[1,8,1,1] [0.5, -1, 2, 0.25, -0.75, 1.5, 3, -2]
a     = Add(y1d, b)
s2    = Constant f32[] [0.03]
z2    = Constant u8[] [5]
aq    = QuantizeLinear(a, s2, z2)
ad    = DequantizeLinear(aq, s2, z2)
s3    = Constant f32[] [0.07]
z3    = Constant u8[] [100]
rq    = QuantizeLinear(ad, s3, z3)
rd    = DequantizeLinear(rq, s3, z3)
out   = Result(rd)
)",
                            1, 8 * 256);
}

} // namespace
