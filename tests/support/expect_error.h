// Assertions for qconv's error contract: bad input throws qconv::error whose
// message starts with the name of what is wrong.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "qconv/types.h"

namespace qconv::test {

// Runs f, which must throw qconv::error with a message starting with `prefix`
// and containing `detail` (if given); any other outcome is a test failure.
inline void expect_error_prefix(const std::function<void()> &f, const std::string &prefix,
                                const std::string &detail = "") {
    try {
        f();
        ADD_FAILURE() << "no error; expected one starting with '" << prefix << "'";
    } catch (const qconv::error &e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "message does not start with '" << prefix << "': " << msg;
        if (!detail.empty()) {
            EXPECT_NE(msg.find(detail), std::string::npos) << "'" << detail << "' not in: " << msg;
        }
    } catch (const std::exception &e) {
        ADD_FAILURE() << "wrong exception type (expected qconv::error starting with '" << prefix
                      << "'): " << e.what();
    }
}

} // namespace qconv::test
