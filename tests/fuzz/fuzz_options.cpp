// Fuzzes the driver's option parser (tools/options.cpp): the input is split
// into arguments at spaces and newlines, then parsed the way every mode
// starts: options, parse_common(), a few typed getters, check_all_used().
// --batch files are not opened (the fuzzer must not read the file system):
// only the positional words are collected.
//
// Property: only driver::usage_error or qconv::error escape, never a crash.
#include <cstdint>
#include <string>
#include <vector>

#include "qconv/types.h"
#include "tools/driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    std::vector<std::string> args;
    std::string cur;
    for (size_t i = 0; i < size; ++i) {
        const char c = static_cast<char>(data[i]);
        if (c == ' ' || c == '\n') {
            if (!cur.empty()) args.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) args.push_back(cur);

    using namespace qconv::driver;
    try {
        const options o(args);
        // --isa lowers the process-wide cap for good; keep the fuzzer's own
        // process on the real ISA by parsing the cap without applying it.
        if (o.has("isa")) (void)qconv::parse_isa(o.get("isa", ""), "--isa");
        // parse_common minus --isa: same code path for everything else.
        std::vector<std::string> rest;
        for (const auto &a : args)
            if (a.rfind("--isa", 0) != 0) rest.push_back(a);
        const options o2(rest);
        const common_options c = parse_common(o2);
        (void)to_string(c.mode);
        (void)o2.get_int("mb", 0, 0, 1 << 20);
        (void)o2.get("dt", "u8:s8:u8");
        for (const auto &w : o2.words()) (void)multiplicity(w);
        o2.check_all_used();
    } catch (const usage_error &) {
    } catch (const qconv::error &) {
    }
    return 0;
}
