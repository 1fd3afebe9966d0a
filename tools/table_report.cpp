// `--report=table`: a table a person reads, instead of key=value lines.
//
// The mode hands every result line to report::line() and every problem, with
// its runs, to report::add(). In the default key=value format line() prints
// and nothing else happens. In table format the lines go to DIR/<op>.log, a
// progress line is kept on stderr (when it is a terminal), and finish() prints
// to stdout:
//   - a header: the measured int8 peak and which run fills which column;
//   - one row per problem: the qconv row (auto's pick, or the fastest exact
//     run of the implementations asked for), its ms, GOPS and % of the peak,
//     the oneDNN baseline of ratio= with its ms, the ratio and ✓/✗;
//   - one line per implementation that was unimplemented, mismatched, failed
//     or inexact somewhere, with a count and the first reason;
//   - the totals, weighted by the `*N` counts like the total=1 lines;
//   - last, the files: the raw log, and a PNG plot (bench/plot.sh) of GOPS per
//     layer and implementation when gnuplot is installed.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>

#include "tools/driver.h"

#ifndef QCONV_PLOT_SCRIPT
#define QCONV_PLOT_SCRIPT ""
#endif

namespace qconv::driver {

namespace {

constexpr size_t line_width = 120; // summary lines are cut to this width (the log has them whole)

bool is_onednn(const std::string &impl) { return impl.rfind("onednn:", 0) == 0; }
bool ran(const report_run &r) { return r.status != "unimplemented"; }
bool good(const report_run &r) { return r.status == "ok" && r.exact; }
// The name of an implementation in the summary lines: "auto" for the dispatcher's runs.
std::string key_of(const report_run &r) { return r.automatic ? "auto" : r.impl; }

std::string cut(const std::string &s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

std::string fmt(double v, int precision) { return v > 0 ? format_double(v, precision) : "-"; }

// The qconv run of a problem: auto's pick, else the fastest exact run of an
// implementation that is not oneDNN's (the first exact one when untimed),
// else the first that ran; -1 when none ran.
int qconv_run(const report_problem &p) {
    int best = -1, first_ran = -1;
    for (size_t i = 0; i < p.runs.size(); ++i) {
        const report_run &r = p.runs[i];
        if (!r.automatic && is_onednn(r.impl)) continue;
        if (first_ran < 0 && ran(r)) first_ran = static_cast<int>(i);
        if (!good(r)) continue;
        if (best < 0 || (r.ms > 0 && r.ms < p.runs[best].ms)) best = static_cast<int>(i);
    }
    return best >= 0 ? best : first_ran;
}

// ✗ when a run of the problem mismatched or failed, or a run shown is inexact.
bool problem_exact(const report_problem &p, int shown, int base) {
    for (const auto &r : p.runs)
        if (r.status == "mismatch" || r.status == "failed") return false;
    if (shown >= 0 && !p.runs[shown].exact) return false;
    return base < 0 || p.runs[base].exact;
}

// The dispatcher's "impl: 'X' does not support this problem on ISA: X attr[0]: why"
// without what the line already says: "attr[0]: why" ("why" for matmul's "X -: why").
std::string short_reason(const std::string &why, const std::string &impl) {
    std::string r = why;
    const auto at = r.find("does not support this problem");
    if (at != std::string::npos) {
        const auto colon = r.find(": ", at);
        r = colon == std::string::npos ? r : r.substr(colon + 2);
    }
    if (r.rfind(impl + " ", 0) == 0) r = r.substr(impl.size() + 1);
    if (r.rfind("-: ", 0) == 0) r = r.substr(3); // no attribute set (matmul)
    return r;
}

std::string layer_name(const std::string &name) {
    const auto colon = name.rfind(':');
    return colon == std::string::npos ? name : name.substr(colon + 1);
}

// One summary line per implementation and kind of trouble, first reason kept.
struct trouble {
    int count = 0;
    std::string first, layer;
};

std::string quote(const std::string &s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string driver_dir() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    const std::string exe(buf, static_cast<size_t>(n));
    const auto slash = exe.rfind('/');
    return slash == std::string::npos ? "." : exe.substr(0, slash);
}

// <driver's folder>/reports/YYYYmmdd-HHMMSS, with -2, -3, ... when taken.
std::string new_report_dir() {
    const std::string parent = driver_dir() + "/reports";
    make_dirs(parent, "--report-dir");
    char stamp[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
    for (int i = 1;; ++i) {
        const std::string d = parent + "/" + stamp + (i > 1 ? "-" + std::to_string(i) : "");
        if (mkdir(d.c_str(), 0755) == 0) return d;
        if (errno != EEXIST) throw usage_error("--report-dir: cannot create '" + d + "': " + std::strerror(errno));
    }
}

} // namespace

report::report(const options &o, const std::string &op, bool int8_peak, const std::string &baseline)
    : op_(op), baseline_(baseline), int8_peak_(int8_peak) {
    const std::string format = o.get("report", "kv");
    if (format != "kv" && format != "table") throw usage_error("--report: expected kv or table (got '" + format + "')");
    table_ = format == "table";
    dir_ = o.get("report-dir", "");
    const char *env = std::getenv("QCONV_PEAK_FILE");
    peak_file_ = o.get("peak-file", env ? env : "");
}

report::~report() {
    if (log_) std::fclose(log_);
}

void report::open_log() {
    if (dir_.empty()) dir_ = new_report_dir();
    make_dirs(dir_, "--report-dir");
    const std::string path = dir_ + "/" + op_ + ".log";
    log_ = std::fopen(path.c_str(), "w");
    if (!log_) throw usage_error("--report-dir: cannot write '" + path + "'");
}

void report::line(const out_line &l) {
    if (!table_) return l.print();
    if (!log_) open_log();
    std::fprintf(log_, "%s\n", l.str().c_str());
    std::fflush(log_);
}

void report::progress(size_t done, size_t total, const std::string &layer) {
    if (!table_ || !isatty(STDERR_FILENO)) return;
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", done, total, layer_name(layer).c_str());
    std::fflush(stderr);
    progress_shown_ = true;
}

void report::add(report_problem p) { problems_.push_back(std::move(p)); }

namespace {

struct table_row {
    std::string layer, own, own_ms, gops, peak, base, base_ms, ratio, exact;
};

void print_rows(const std::vector<table_row> &rows) {
    size_t wl = 5, wo = 9, wb = 15;
    for (const auto &r : rows) {
        wl = std::max(wl, r.layer.size());
        wo = std::max(wo, r.own.size());
        wb = std::max(wb, r.base.size());
    }
    for (const auto &r : rows)
        std::printf("%-*s %-*s %7s %6s %5s | %-*s %7s %5s  %s\n", int(wl), r.layer.c_str(), int(wo), r.own.c_str(),
                    r.own_ms.c_str(), r.gops.c_str(), r.peak.c_str(), int(wb), r.base.c_str(), r.base_ms.c_str(),
                    r.ratio.c_str(), r.exact.c_str());
}

// Per implementation: unimplemented, mismatch/failed and inexact counts.
void print_troubles(const std::vector<report_problem> &problems) {
    std::vector<std::string> order;
    std::map<std::string, std::map<std::string, trouble>> by; // impl -> kind -> trouble
    std::map<std::string, int> tried;
    for (const auto &p : problems)
        for (const auto &r : p.runs) {
            const std::string k = key_of(r);
            if (!tried.count(k)) order.push_back(k);
            ++tried[k];
            std::string kind;
            if (r.status == "unimplemented") kind = "unimplemented";
            else if (r.status == "inexact") kind = "differs, as labelled (exact=0)";
            else if (r.status != "ok") kind = r.status == "mismatch" ? "mismatched" : "failed";
            else if (!r.exact) kind = "inexact (exact=0)";
            if (kind.empty()) continue;
            trouble &t = by[k][kind];
            if (!t.count++) t.first = short_reason(r.why, r.impl), t.layer = layer_name(p.layer);
        }
    for (const auto &k : order)
        for (const auto &[kind, t] : by[k]) {
            // The layer is named only when the reason may not hold for all.
            std::string l = k + ": " + kind + " on " + std::to_string(t.count) + " of " + std::to_string(tried[k]) +
                            " problems (first reason: " + (t.count < tried[k] ? t.layer + ": " : "") + t.first;
            l = cut(l, line_width - 1) + ")";
            std::printf("%s\n", l.c_str());
        }
}

// GOPS per layer (rows) and implementation (columns) for bench/plot.sh.
bool write_tsv(const std::string &path, const std::vector<report_problem> &problems) {
    std::vector<std::string> cols;
    for (const auto &p : problems)
        for (const auto &r : p.runs)
            if (r.ms > 0 && std::find(cols.begin(), cols.end(), key_of(r)) == cols.end()) cols.push_back(key_of(r));
    if (cols.empty()) return false;
    std::ofstream f(path);
    f << "layer";
    for (const auto &c : cols) f << '\t' << c;
    f << '\n';
    for (const auto &p : problems) {
        f << layer_name(p.layer);
        for (const auto &c : cols) {
            std::string cell = "-";
            for (const auto &r : p.runs)
                if (key_of(r) == c && r.ms > 0 && r.status == "ok") cell = format_double(p.ops / (r.ms * 1e6), 2);
            f << '\t' << cell;
        }
        f << '\n';
    }
    return bool(f);
}

// Runs bench/plot.sh on the TSV; returns what the last line says about the plot.
std::string plot(const std::string &dir, const std::string &op) {
    const std::string script = QCONV_PLOT_SCRIPT, tsv = dir + "/" + op + ".tsv", png = dir + "/" + op + ".png";
    if (script.empty() || access(script.c_str(), R_OK) != 0) return "no plot (bench/plot.sh not found)";
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return "no plot (gnuplot is not installed)";
    const std::string cmd =
        "bash " + quote(script) + " " + quote(tsv) + " " + quote(png) + " >" + quote(dir + "/plot.log") + " 2>&1";
    if (std::system(cmd.c_str()) != 0 || access(png.c_str(), R_OK) != 0)
        return "no plot (bench/plot.sh failed, see " + dir + "/plot.log)";
    return "plot: " + png;
}

} // namespace

void report::finish(bool performance, int threads) {
    if (progress_shown_) std::fprintf(stderr, "\r\033[K");
    if (!table_) return;
    if (!log_) open_log();
    const peak_info peak = performance && int8_peak_ ? measure_int8_peak(threads, peak_file_) : peak_info{};

    std::printf("op=%s: %zu problems. qconv row: auto's pick, or the fastest exact run of the implementations asked "
                "for;\noneDNN row: %s; ratio = oneDNN ms / qconv ms (above 1: qconv is faster).\n",
                op_.c_str(), problems_.size(), baseline_.c_str());
    if (peak.gops > 0)
        std::printf(
            "%%peak: of the measured int8 peak, %.0f GOPS (%s, %d thread%s; best of %d pinned runs, the slowest "
            "%.0f: spread %.1f%%; %s).\n",
            peak.gops, peak.what.c_str(), peak.threads, peak.threads == 1 ? "" : "s", peak.runs, peak.low_gops,
            100 * (peak.gops - peak.low_gops) / peak.gops,
            peak.from_file.empty() ? "measured now" : ("as measured earlier in " + peak.from_file).c_str());
    std::vector<table_row> rows{{"layer", "qconv row", "ms", "GOPS", "%peak", "oneDNN row", "ms", "ratio", "exact"}};
    double own_ms = 0, own_ops = 0, pair_own = 0, pair_base = 0;
    int pairs = 0;
    bool all_exact = true;
    for (const auto &p : problems_) {
        const int q = qconv_run(p), b = p.baseline;
        table_row row;
        row.layer = layer_name(p.layer);
        row.own = q >= 0 ? p.runs[q].impl : "(none ran)";
        const double ms = q >= 0 ? p.runs[q].ms : -1, bms = b >= 0 ? p.runs[b].ms : -1;
        row.own_ms = fmt(ms, 4);
        const double gops = ms > 0 ? p.ops / (ms * 1e6) : -1;
        row.gops = fmt(gops, gops < 100 ? 1 : 0);
        row.peak = ms > 0 && peak.gops > 0 ? format_double(100 * p.ops / (ms * 1e6) / peak.gops, 1) : "-";
        row.base = b >= 0 ? (is_onednn(p.runs[b].impl) ? p.runs[b].impl.substr(7) : p.runs[b].impl) : "-";
        row.base_ms = fmt(bms, 4);
        row.ratio = ms > 0 && bms > 0 ? format_double(bms / ms, 2) : "-";
        const bool exact = problem_exact(p, q, b);
        all_exact = all_exact && exact;
        row.exact = exact ? "✓" : "✗";
        rows.push_back(row);
        if (ms > 0) own_ms += ms * p.count, own_ops += p.ops * p.count;
        if (ms > 0 && bms > 0) pair_own += ms * p.count, pair_base += bms * p.count, ++pairs;
    }
    print_rows(rows);
    print_troubles(problems_);
    if (performance && own_ms > 0) {
        std::printf("total (layers weighted by *N): qconv %.4f ms, %.0f GOPS", own_ms, own_ops / (own_ms * 1e6));
        if (peak.gops > 0) std::printf(", %.1f%% of peak", 100 * own_ops / (own_ms * 1e6) / peak.gops);
        if (pair_own > 0)
            std::printf("; oneDNN %.4f ms; ratio %.2f on %d of %zu layers", pair_base, pair_base / pair_own, pairs,
                        problems_.size());
        std::printf("; exact %s\n", all_exact ? "✓" : "✗");
    } else {
        std::printf("total: %zu problems, exact %s\n", problems_.size(), all_exact ? "✓" : "✗");
    }
    const bool have_tsv = performance && write_tsv(dir_ + "/" + op_ + ".tsv", problems_);
    const std::string plotted = have_tsv ? plot(dir_, op_) : "no plot (nothing timed)";
    std::printf("raw log: %s/%s.log  %s\n", dir_.c_str(), op_.c_str(), plotted.c_str());
    std::fflush(stdout);
}

} // namespace qconv::driver
