// qconv-driver: a benchdnn-like command-line driver.
//
// The driver is a table of modes (`qconv-driver conv ...`, `qconv-driver
// matmul ...`): each mode is one function in its own file, registered by one
// row in tools/driver_main.cpp. This header holds what the modes share:
//   - options: `--key=value` arguments and positional words, with a check that
//     every option given was understood (an unknown one is bad input);
//   - out_line: one result line of space-separated key=value fields;
//   - measure(): median time over repetitions, bounded by a time budget;
//   - batch files: '#' comments, one problem per line, `*N` in a name counts
//     the layer N times in totals;
//   - report: where results go — key=value lines on stdout (the default, for
//     scripts) or, with --report=table, a table for a person with the lines
//     in a log file (tools/table_report.cpp);
//   - the exit codes: 0 all passed, 1 a mismatch or failure, 2 bad input (a
//     run of a row labelled exact=0 that differs is status=inexact, no failure).
// Modes reach implementations only through the public API (include/qconv).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <iosfwd>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "qconv/types.h"

namespace qconv::driver {

enum exit_code { exit_ok = 0, exit_fail = 1, exit_bad_input = 2 };

// Bad command line or input file: message on stderr, exit status 2.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ------------------------------------------------------------------ options
class options {
public:
    // argv after the mode word: "--key=value", "--flag" (value "1") or words.
    explicit options(const std::vector<std::string> &args);

    bool has(const std::string &key) const;
    std::string get(const std::string &key, const std::string &def) const;
    // All values of a repeatable option, in command-line order.
    std::vector<std::string> all(const std::string &key) const;
    int64_t get_int(const std::string &key, int64_t def, int64_t lo, int64_t hi) const;
    // "--key" or --key=1|0 (also yes/no, true/false, on/off); anything else is a usage_error.
    bool get_bool(const std::string &key, bool def) const;
    const std::vector<std::string> &words() const { return words_; }
    // Throws usage_error naming the first option no get()/has()/all() asked for.
    void check_all_used() const;

private:
    std::vector<std::pair<std::string, std::string>> kv_;
    std::vector<std::string> words_;
    mutable std::set<std::string> used_;
};

// Options every mode understands (a mode reads the ones it uses).
struct common_options {
    enum class mode_kind { C, P, CP };
    mode_kind mode = mode_kind::C;
    std::string impl = "auto"; // auto | NAME | all | list
    int threads = 0;           // 0: OpenMP default
    uint32_t seed = 1;
    std::string dump_dir;   // empty: no dump
    int reps = 20;          // maximum timed repetitions (P mode)
    double budget_ms = 100; // stop repeating once this much time was spent
    bool cold = false;      // caches flushed before every timed run (conv, matmul)
    bool correctness() const { return mode != mode_kind::P; }
    bool performance() const { return mode != mode_kind::C; }
};
// Reads --mode --impl --threads --seed --dump --reps --budget-ms --isa and applies
// --isa (qconv::set_max_cpu_isa, and ONEDNN_MAX_CPU_ISA unless already set) and
// --threads (omp_set_num_threads).
common_options parse_common(const options &o);
const char *to_string(common_options::mode_kind m);
// --impl: "auto", "all" (every name), one name or a comma-separated list;
// an unknown name is a usage_error listing the valid ones.
std::vector<std::string> selected_impls(const std::string &impl, const std::vector<std::string> &names);

// --------------------------------------------------------------- batch files
struct problem_text {
    std::string text;   // one problem as written (comment stripped)
    int64_t count = 1;  // `*N` at the end of its name: occurs N times
    std::string origin; // "FILE:LINE" or "argument N", for error messages
};
// Positional words plus every --batch=FILE line, in order.
std::vector<problem_text> collect_problems(const options &o);
// A batch file is read up to batch_max_bytes, each line up to batch_max_line
// bytes; a longer file or line, or a NUL byte, is a usage_error (so is a
// directory). Any readable file works, a pipe included.
constexpr int64_t batch_max_bytes = int64_t(16) << 20;
constexpr size_t batch_max_line = 4096;
std::vector<problem_text> read_batch_file(const std::string &path);
// N of a trailing "*N" inside the quoted name, else 1; a count outside
// [1, max_count] (`*0`, `*-3`) is a usage_error.
constexpr int64_t max_count = 1000000;
int64_t multiplicity(const std::string &text);

// ----------------------------------------------------------------- output
class out_line {
public:
    out_line &add(const std::string &key, const std::string &value);
    out_line &add(const std::string &key, double value, int precision = 4);
    out_line &add_int(const std::string &key, int64_t value);
    // Free text goes last, quoted: why="...".
    out_line &why(const std::string &text);
    std::string str() const;
    void print() const; // to stdout, flushed

private:
    std::string s_;
};

// ----------------------------------------------------------------- timing
struct timing {
    double median_ms = 0;
    double best_ms = 0; // the fastest repetition
    int reps = 0;
};
// Runs fn() once unwarmed unless `warm`, then repeats it until `reps`
// repetitions or `budget_ms` milliseconds (at least one repetition).
timing measure(const std::function<void()> &fn, int reps, double budget_ms, bool warm, bool cold = false);
double now_ms();

// Accumulates per-implementation totals and prints one total line each.
class totals {
public:
    // ms < 0: not measured. count weights the layer (`*N`).
    void add(const std::string &impl, const std::string &status, double ops, double ms, double baseline_ms,
             int64_t count);
    // One line per implementation: op=<op> impl=... total=1 ...
    std::vector<out_line> lines(const std::string &op, bool performance) const;

private:
    struct acc {
        int problems = 0, ok = 0, mismatch = 0, inexact = 0, unimplemented = 0, failed = 0;
        double ops = 0, ms = 0, base_ms = 0, own_ms_with_base = 0;
    };
    std::vector<std::string> order_;
    std::map<std::string, acc> by_impl_;
};

// ----------------------------------------------------------------- reports
// One run of one problem, as the table sees it.
struct report_run {
    std::string impl;       // the implementation that ran (the name asked for when unimplemented)
    bool automatic = false; // requested as "auto"
    std::string status;     // ok | mismatch | inexact | unimplemented | failed
    bool exact = true;      // false: a peer known to be inexact (exact=0)
    double ms = -1;         // < 0: not measured
    std::string why;
};

// One problem (layer) with every run, and which run is the ratio= baseline.
struct report_problem {
    std::string layer; // the name n"...", else the descriptor
    double ops = 0;    // operations of one run
    int64_t count = 1; // `*N`
    std::vector<report_run> runs;
    int baseline = -1; // index into runs, -1: none
};

// Where a mode's results go. --report=kv (default): key=value lines on stdout.
// --report=table: the lines go to DIR/<op>.log (--report-dir=DIR, default
// <driver's folder>/reports/<timestamp>), a progress line to stderr when it is
// a terminal, and at the end a table to stdout whose last line names DIR.
class report {
public:
    // int8_peak: the table has a %peak column (the int8 multiply-add peak);
    // baseline: what the problems' baseline run is, for the table's header.
    report(const options &o, const std::string &op, bool int8_peak, const std::string &baseline);
    ~report();
    bool table() const { return table_; }
    void line(const out_line &l);
    void progress(size_t done, size_t total, const std::string &layer);
    void add(report_problem p);
    // Prints the table (table mode only); `performance`: the runs were timed.
    void finish(bool performance, int threads);

private:
    std::string op_, baseline_, dir_, peak_file_;
    bool table_ = false, int8_peak_ = false;
    bool progress_shown_ = false;
    std::FILE *log_ = nullptr;
    std::vector<report_problem> problems_;
    void open_log();
};

// The int8 multiply-add peak of this CPU at qconv's ISA level (tools/peak.cpp).
struct peak_info {
    double gops = 0;     // the best run
    double low_gops = 0; // the slowest run: the spread is [low_gops, gops]
    int runs = 0;
    int threads = 1;
    std::string what;      // the instructions and ISA level measured
    std::string from_file; // the peak file it was read from; empty: measured now
};
// Measured now, or read from `peak_file` (empty: none) where an earlier run of
// the same ISA level and thread count left it; a new measurement is added to it.
peak_info measure_int8_peak(int threads, const std::string &peak_file);

// `qconv-driver MODE --help` (tools/help.cpp); an empty mode: the common options only.
void print_help(std::ostream &os, const std::string &mode);

// ------------------------------------------------------------------ modes
// A mode gets the arguments after its name and returns the exit status.
using mode_fn = int (*)(const std::vector<std::string> &args);
int conv_mode(const std::vector<std::string> &args);
int matmul_mode(const std::vector<std::string> &args);
int graph_mode(const std::vector<std::string> &args);

// ----------------------------------------------------------------- memory
// A conv or matmul problem is refused before its data is generated when what
// the driver holds for it (inputs, outputs, references, weights and their
// packed copies) is above max_problem_bytes (32 GiB) or above the memory the
// process may use (core/memory.h).
constexpr double max_problem_bytes = double(int64_t(1) << 35);
// parts: (tensor, bytes held for it). Throws qconv::error naming the largest
// part, with the total and the limit.
void check_problem_memory(const std::vector<std::pair<std::string, double>> &parts);

// ------------------------------------------------------------------ misc
// Creates directories like `mkdir -p`; throws usage_error naming `option`
// (--dump, --report-dir) on failure.
void make_dirs(const std::string &path, const std::string &option);
void write_file(const std::string &path, const void *data, size_t bytes);
std::string format_double(double v, int precision);

} // namespace qconv::driver
