// Text helpers shared by the parsers of qconv's text forms (descriptors,
// post-op chains) and by the tools and test support that read those forms.
#pragma once

#include <cctype>
#include <string>
#include <vector>

namespace qconv::detail {

// "a:b::c" split at ':' gives {"a", "b", "", "c"}; "" gives {""}.
inline std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    size_t b = 0;
    for (;;) {
        const size_t e = s.find(sep, b);
        out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) return out;
        b = e + 1;
    }
}

// s without leading and trailing white space.
inline std::string trim(const std::string &s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

} // namespace qconv::detail
