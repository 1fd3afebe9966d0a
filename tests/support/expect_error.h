// Assertions for qconv's error contract: bad input throws qconv::error whose
// message starts with the name of what is wrong.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "qconv/types.h"

namespace qconv::test {

// f must throw qconv::error with a message starting with `prefix` and
// containing `detail` (if given); anything else fails the test.
inline void expect_error_prefix(const std::function<void()> &f, const std::string &prefix,
                                const std::string &detail = "") {
    using namespace ::testing;
    EXPECT_THAT(f, ThrowsMessage<qconv::error>(AllOf(StartsWith(prefix), HasSubstr(detail))));
}

} // namespace qconv::test
