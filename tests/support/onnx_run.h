// Reading and running the models of tests/support/onnx_models.h through the
// ONNX reader: what the ONNX op tests share.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "qconv/graph_onnx.h"
#include "tests/support/onnx_models.h"

namespace qconv::test::onnx_model {

inline std::unique_ptr<graph::graph> read(const builder &b) {
    const std::string s = b.bytes();
    return graph::parse_onnx(s.data(), s.size());
}

// Runs the model read from b; the outputs as floats (their shapes in *shapes).
// The text form of what was read loads back and computes the same bytes.
inline std::vector<std::vector<float>> run(const builder &b, const std::vector<graph::tensor> &in,
                                           std::vector<graph::shape_t> *shapes = nullptr) {
    auto gr = read(b);
    const auto out = graph::compiled_graph(*gr).run(in);
    auto back = graph::parse(graph::to_text(*gr));
    const auto again = graph::compiled_graph(*back).run(in);
    std::vector<std::vector<float>> r;
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(out[i].bytes, again[i].bytes) << "output " << i << " after the text round trip";
        r.push_back(out[i].to_f32());
        if (shapes) shapes->push_back(out[i].shape);
    }
    return r;
}

inline graph::tensor f32(const graph::shape_t &s, const std::vector<float> &v) {
    return graph::tensor::from_f32(graph::dtype::f32, s, v);
}

// The message of the error reading b throws ("" when it is read).
inline std::string refusal(const builder &b) {
    try {
        read(b);
    } catch (const qconv::error &e) {
        return e.what();
    }
    return "";
}

} // namespace qconv::test::onnx_model
