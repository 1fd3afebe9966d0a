// Fuzzes the text parsers of the public API: the benchdnn conv descriptor,
// the matmul descriptor and the post-op chain. The input is split at the
// first two newlines: conv text, matmul text, post-op text.
//
// Properties: every parser either succeeds or throws qconv::error (never
// another exception, never a crash); a parsed conv descriptor is valid and
// prints to a text that parses back to the same descriptor; a parsed post-op
// chain validates for the OC it was parsed for.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/lowering.h"
#include "qconv/qconv.h"

namespace {

std::string field(const std::string &s, size_t &pos) {
    const size_t nl = s.find('\n', pos);
    std::string r = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? s.size() : nl + 1;
    return r;
}

[[noreturn]] void broken(const std::string &what) {
    std::fprintf(stderr, "fuzz_desc: %s\n", what.c_str());
    std::abort();
}

void conv_text(const std::string &t) {
    qconv::conv_desc d;
    try {
        d = qconv::conv_desc::parse(t);
    } catch (const qconv::error &) {
        return;
    }
    d.validate(); // parse() promises a valid descriptor: no throw allowed here
    const std::string s = d.str();
    qconv::conv_desc back;
    try {
        back = qconv::conv_desc::parse(s);
    } catch (const qconv::error &e) {
        broken("'" + t + "' parses, its canonical form '" + s + "' does not: " + e.what());
    }
    if (back != d) broken("'" + t + "' -> '" + s + "' -> '" + back.str() + "' is not the same descriptor");
}

void matmul_text(const std::string &t) {
    qconv::matmul_desc d;
    try {
        d = qconv::matmul_desc::parse(t);
        d.validate();
    } catch (const qconv::error &) {
        return;
    }
    const qconv::matmul_desc back = qconv::matmul_desc::parse(d.str());
    if (back.m != d.m || back.k != d.k || back.n != d.n) broken("matmul '" + t + "' does not round-trip");
}

void post_op_text(const std::string &t, int64_t oc) {
    qconv::post_ops ops;
    try {
        ops = qconv::parse_post_ops(t, oc);
    } catch (const qconv::error &) {
        return;
    }
    qconv::validate(ops, oc); // a parsed chain must be valid for its OC
    (void)qconv::to_string(ops);
    if (!(qconv::parse_post_ops(qconv::to_text(ops), oc) == ops))
        broken("post-ops '" + t + "' -> '" + qconv::to_text(ops) + "' is not the same chain");
    (void)qconv::needs_binary(ops);
    for (bool f32 : {false, true}) {
        (void)qconv::lower_legacy(ops, oc, f32);
        (void)qconv::lower_stock(ops, oc, f32);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    const std::string s(reinterpret_cast<const char *>(data), size);
    size_t pos = 0;
    const std::string conv = field(s, pos), mm = field(s, pos), ops = field(s, pos);
    conv_text(conv);
    matmul_text(mm);
    // The OC the chain is parsed for comes from the input too (1..64).
    const int64_t oc = size ? 1 + data[0] % 64 : 1;
    post_op_text(ops, oc);
    return 0;
}
