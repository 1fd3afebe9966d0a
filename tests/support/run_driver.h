// Runs the qconv-driver built in this tree as a child process and collects its
// exit status, standard output and standard error (for the driver tests).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace qconv::test {

struct driver_result {
    int rc = -1; // exit status; -1 if it did not exit normally
    std::string out, err;
};

// Arguments are passed single-quoted through the shell. Each call writes its
// stderr to its own temporary file, so concurrent tests do not interfere.
driver_result run_driver(const std::vector<std::string> &args);
// The same with environment variables set for the child (name, value).
driver_result run_driver(const std::vector<std::string> &args,
                         const std::vector<std::pair<std::string, std::string>> &env);

} // namespace qconv::test
