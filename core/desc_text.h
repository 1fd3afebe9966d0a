// Internal helpers shared by the descriptor parsers (conv_desc, matmul_desc).
//
// Both descriptors use benchdnn's "key<integer>" syntax with optional '_'
// between fields, e.g. "g1mb2_ic64ih56" or "m1k4096n4096". tokenize_desc()
// splits such a text into (key, value) tokens and rejects malformed text with
// a qconv::error naming the key (or "desc" when no key applies). The checked_*
// helpers do int64 arithmetic with overflow detection (__builtin_*_overflow),
// failing with the given field name: sizes in qconv never silently wrap.
#pragma once

#include <cctype>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/text.h"
#include "qconv/types.h"

namespace qconv {
namespace detail {

// No tensor may have more elements than this, and no single size, stride,
// pad or dilation may exceed it: larger values are certainly typos.
constexpr int64_t size_limit = int64_t(1) << 40;

struct desc_token {
    std::string key;      // "mb", "ic", ... or "n" for a name
    int64_t value = 0;    // unused for names
    std::string name;     // the quoted text of n"..."
    size_t pos = 0;       // offset of the key in the text
    bool unknown = false; // the value was written `?` (allow_unknown): given at run time
};

inline int64_t checked_mul(int64_t a, int64_t b, const std::string &field, const std::string &what) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) fail(field, what + " overflows int64");
    return r;
}
inline int64_t checked_add(int64_t a, int64_t b, const std::string &field, const std::string &what) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) fail(field, what + " overflows int64");
    return r;
}
inline int64_t checked_sub(int64_t a, int64_t b, const std::string &field, const std::string &what) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) fail(field, what + " overflows int64");
    return r;
}

// Product of factors (all positive) as the element count of tensor `field`;
// fails on int64 overflow and above size_limit.
inline int64_t checked_elems(const std::vector<int64_t> &factors, const std::string &field,
                             const std::string &formula) {
    int64_t r = 1;
    for (int64_t f : factors) r = checked_mul(r, f, field, "element count " + formula);
    if (r > size_limit)
        fail(field, "element count " + formula + " = " + std::to_string(r) + " exceeds the limit of 2^40 elements");
    return r;
}

// Tokenizes `text` (already trimmed). With allow_name, n"..." is a name token.
// Keys are runs of lowercase letters, each passed to check_key (which throws
// for unknown keys) and followed by an optionally negative decimal integer,
// or, with allow_unknown, by `?` alone (desc_token::unknown; the caller says
// which keys may be unknown). Duplicate keys are rejected here. Messages
// quote `text` as given.
inline std::vector<desc_token> tokenize_desc(const std::string &text, bool allow_name,
                                             const std::function<void(const std::string &)> &check_key,
                                             bool allow_unknown = false) {
    std::vector<desc_token> out;
    const std::string quoted = "'" + text + "'";
    if (text.empty()) fail("desc", "empty descriptor");
    size_t p = 0;
    while (p < text.size()) {
        if (text[p] == '_') {
            ++p;
            continue;
        }
        const size_t start = p;
        while (p < text.size() && text[p] >= 'a' && text[p] <= 'z') ++p;
        if (p == start)
            fail("desc", std::string("unexpected character '") + text[p] + "' at offset " + std::to_string(p) + " in " +
                             quoted);
        desc_token t;
        t.key = text.substr(start, p - start);
        t.pos = start;
        check_key(t.key);
        for (const desc_token &o : out)
            if (o.key == t.key) fail(t.key, "given twice in " + quoted);
        if (allow_name && t.key == "n") {
            if (p >= text.size() || text[p] != '"') fail("n", "expected a quoted name n\"...\" in " + quoted);
            const size_t close = text.find('"', p + 1);
            if (close == std::string::npos) fail("n", "unterminated name in " + quoted);
            t.name = text.substr(p + 1, close - p - 1);
            p = close + 1;
            out.push_back(t);
            continue;
        }
        if (allow_unknown && p < text.size() && text[p] == '?') {
            t.unknown = true;
            ++p;
            out.push_back(t);
            continue;
        }
        bool neg = false;
        if (p < text.size() && text[p] == '-') {
            neg = true;
            ++p;
        }
        const size_t digits = p;
        int64_t v = 0;
        while (p < text.size() && text[p] >= '0' && text[p] <= '9') {
            if (__builtin_mul_overflow(v, int64_t(10), &v) || __builtin_add_overflow(v, int64_t(text[p] - '0'), &v))
                fail(t.key, "number too large in " + quoted);
            ++p;
        }
        if (p == digits) fail(t.key, "expected a number after '" + t.key + "' in " + quoted);
        t.value = neg ? -v : v;
        out.push_back(t);
    }
    return out;
}

} // namespace detail
} // namespace qconv
