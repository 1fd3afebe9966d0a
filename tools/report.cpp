// Output lines, timing and totals of qconv-driver.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sys/stat.h>
#include <vector>

#include "tools/driver.h"

namespace qconv::driver {

std::string format_double(double v, int precision) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf;
}

out_line &out_line::add(const std::string &key, const std::string &value) {
    if (!s_.empty()) s_ += ' ';
    s_ += key + "=" + value;
    return *this;
}

out_line &out_line::add(const std::string &key, double value, int precision) {
    return add(key, format_double(value, precision));
}

out_line &out_line::add_int(const std::string &key, int64_t value) { return add(key, std::to_string(value)); }

out_line &out_line::why(const std::string &text) {
    std::string t = text;
    for (char &c : t)
        if (c == '"' || c == '\n' || c == '\r') c = '\'';
    return add("why", "\"" + t + "\"");
}

std::string out_line::str() const { return s_; }

void out_line::print() const { std::cout << s_ << std::endl; }

double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Writes a buffer larger than the last-level cache: what the timed run reads
// next comes from memory, as a layer's weights do on their first use in a
// network (whose other layers' weights and activations evicted them).
void evict_caches() {
    static std::vector<uint8_t> big(size_t(96) << 20);
    static uint8_t v = 0;
    ++v;
    for (size_t i = 0; i < big.size(); i += 64) big[i] = v;
}

timing measure(const std::function<void()> &fn, int reps, double budget_ms, bool warm, bool cold) {
    if (!warm) fn();
    std::vector<double> t;
    double excluded = 0; // eviction time, not counted against the budget
    const double start = now_ms();
    while (static_cast<int>(t.size()) < reps) {
        if (cold) {
            const double e0 = now_ms();
            evict_caches();
            excluded += now_ms() - e0;
        }
        const double t0 = now_ms();
        fn();
        const double t1 = now_ms();
        t.push_back(t1 - t0);
        if (t1 - start - excluded >= budget_ms) break;
    }
    std::sort(t.begin(), t.end());
    const size_t n = t.size();
    timing r;
    r.reps = static_cast<int>(n);
    r.median_ms = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    r.best_ms = t.front();
    return r;
}

void totals::add(const std::string &impl, const std::string &status, double ops, double ms, double baseline_ms,
                 int64_t count) {
    if (!by_impl_.count(impl)) order_.push_back(impl);
    acc &a = by_impl_[impl];
    ++a.problems;
    if (status == "ok") ++a.ok;
    else if (status == "mismatch") ++a.mismatch;
    else if (status == "inexact") ++a.inexact;
    else if (status == "unimplemented") ++a.unimplemented;
    else ++a.failed;
    if (ms >= 0) {
        a.ops += ops * count;
        a.ms += ms * count;
        if (baseline_ms > 0) {
            a.base_ms += baseline_ms * count;
            a.own_ms_with_base += ms * count;
        }
    }
}

std::vector<out_line> totals::lines(const std::string &op, bool performance) const {
    std::vector<out_line> out;
    for (const auto &name : order_) {
        const acc &a = by_impl_.at(name);
        out_line l;
        l.add("op", op).add("impl", name).add("total", "1").add_int("problems", a.problems).add_int("ok", a.ok);
        l.add_int("mismatch", a.mismatch).add_int("unimplemented", a.unimplemented).add_int("failed", a.failed);
        if (a.inexact) l.add_int("inexact", a.inexact);
        if (performance && a.ms > 0) {
            l.add("ms", a.ms, 4).add("gops", a.ops / (a.ms * 1e6), 2);
            if (a.own_ms_with_base > 0) l.add("ratio", a.base_ms / a.own_ms_with_base, 3);
        }
        out.push_back(l);
    }
    return out;
}

void make_dirs(const std::string &path, const std::string &option) {
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        cur = path.substr(0, pos);
        if (cur.empty()) continue;
        if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
            throw usage_error(option + ": cannot create '" + cur + "': " + std::strerror(errno));
    }
}

void write_file(const std::string &path, const void *data, size_t bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char *>(data), static_cast<std::streamsize>(bytes));
    if (!f) throw usage_error("--dump: cannot write '" + path + "'");
}

} // namespace qconv::driver
