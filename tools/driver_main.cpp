// qconv-driver entry point: picks the mode from the first word.
//
// To add a mode, write tools/<mode>_mode.cpp defining
//   int qconv::driver::<mode>_mode(const std::vector<std::string> &args)
// and add one row to `modes` below (declare the function in tools/driver.h).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "qconv/types.h"
#include "tools/driver.h"

namespace qconv::driver {
namespace {

struct mode_entry {
    const char *name;
    mode_fn fn;
    const char *help;
};

const mode_entry modes[] = {
    {"conv", conv_mode, "int8 convolution: conv [options] DESC... | --batch=FILE"},
    {"matmul", matmul_mode,
     "weight-compressed MatMul: matmul [--wei= --group= --zp= --bias --dq] DESC... | --batch=FILE"},
    {"graph", graph_mode,
     "graph (.qg or .onnx) before/after the passes (conv1x1->MatMul, int8 lowering): graph FILE [--save=FILE] "
     "[--input=NAME=FILE.npy] [--output-dir=DIR] [--report=table]"},
};

void usage(std::ostream &os) {
    os << "usage: qconv-driver MODE [options] [problems]\nmodes:\n";
    for (const auto &m : modes) os << "  " << m.name << "  " << m.help << "\n";
    os << "every option of a mode, with its default and an example: qconv-driver MODE --help\n";
}

} // namespace
} // namespace qconv::driver

int main(int argc, char **argv) {
    using namespace qconv::driver;
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        usage(args.empty() ? std::cerr : std::cout);
        if (!args.empty()) print_help(std::cout, "");
        return args.empty() ? exit_bad_input : exit_ok;
    }
    // Options before any mode word belong to the conv mode, as in
    // `qconv-driver --impl=list` or `qconv-driver --batch=FILE`.
    std::string name = "conv";
    if (args[0].rfind("--", 0) != 0) {
        name = args[0];
        args.erase(args.begin());
    }
    for (const auto &m : modes) {
        if (name != m.name) continue;
        if (std::find(args.begin(), args.end(), "--help") != args.end() ||
            std::find(args.begin(), args.end(), "-h") != args.end()) {
            print_help(std::cout, m.name);
            return exit_ok;
        }
        try {
            // Settings from the environment are checked before anything runs: a bad
            // one is bad input (exit 2), not a row reported unimplemented.
            qconv::check_environment();
            return m.fn(args);
        } catch (const usage_error &e) {
            std::cerr << "qconv-driver: " << e.what() << "\n";
            return exit_bad_input;
        } catch (const qconv::error &e) {
            std::cerr << "qconv-driver: " << e.what() << "\n";
            return exit_bad_input;
        } catch (const std::exception &e) {
            std::cerr << "qconv-driver: failed: " << e.what() << "\n";
            return exit_fail;
        }
    }
    std::cerr << "qconv-driver: unknown mode '" << name << "'\n";
    usage(std::cerr);
    return exit_bad_input;
}
