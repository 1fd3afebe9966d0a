// Command-line options of qconv-driver: parsing, the common options, batch files.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sys/stat.h>

#include "core/isa_table.h"
#include "core/memory.h"
#include "core/parallel.h"
#include "core/text.h"
#include "qconv/types.h"
#include "tools/driver.h"

namespace qconv::driver {

options::options(const std::vector<std::string> &args) {
    for (const auto &a : args) {
        if (a.rfind("--", 0) != 0) {
            words_.push_back(a);
            continue;
        }
        const auto eq = a.find('=');
        const std::string key = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        if (key.empty()) throw usage_error("option '" + a + "': empty name");
        kv_.emplace_back(key, eq == std::string::npos ? "1" : a.substr(eq + 1));
    }
}

bool options::has(const std::string &key) const {
    used_.insert(key);
    for (const auto &kv : kv_)
        if (kv.first == key) return true;
    return false;
}

std::string options::get(const std::string &key, const std::string &def) const {
    const auto v = all(key);
    return v.empty() ? def : v.back();
}

std::vector<std::string> options::all(const std::string &key) const {
    used_.insert(key);
    std::vector<std::string> out;
    for (const auto &kv : kv_)
        if (kv.first == key) out.push_back(kv.second);
    return out;
}

int64_t options::get_int(const std::string &key, int64_t def, int64_t lo, int64_t hi) const {
    if (!has(key)) return def;
    const std::string v = get(key, "");
    char *end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
        throw usage_error("--" + key + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "] (got '" + v + "')");
    return x;
}

bool options::get_bool(const std::string &key, bool def) const {
    if (!has(key)) return def;
    const std::string v = get(key, "");
    if (v == "1" || v == "yes" || v == "true" || v == "on") return true;
    if (v == "0" || v == "no" || v == "false" || v == "off") return false;
    throw usage_error("--" + key + ": expected 1 or 0 (got '" + v + "')");
}

void options::check_all_used() const {
    for (const auto &kv : kv_)
        if (!used_.count(kv.first)) throw usage_error("unknown option --" + kv.first);
}

const char *to_string(common_options::mode_kind m) {
    switch (m) {
    case common_options::mode_kind::C: return "C";
    case common_options::mode_kind::P: return "P";
    case common_options::mode_kind::CP: return "CP";
    }
    return "?";
}

common_options parse_common(const options &o) {
    common_options c;
    const std::string m = o.get("mode", "C");
    if (m == "C" || m == "c") c.mode = common_options::mode_kind::C;
    else if (m == "P" || m == "p") c.mode = common_options::mode_kind::P;
    else if (m == "CP" || m == "cp" || m == "PC") c.mode = common_options::mode_kind::CP;
    else throw usage_error("--mode: expected C, P or CP (got '" + m + "')");
    c.impl = o.get("impl", "auto");
    if (c.impl.empty()) throw usage_error("--impl: empty");
    c.threads = static_cast<int>(o.get_int("threads", 0, 0, max_threads));
    c.seed = static_cast<uint32_t>(o.get_int("seed", 1, 0, UINT32_MAX));
    c.dump_dir = o.get("dump", "");
    c.reps = static_cast<int>(o.get_int("reps", 20, 1, 1000000));
    c.budget_ms = static_cast<double>(o.get_int("budget-ms", 100, 0, 3600000));
    c.cold = o.get_int("cold", 0, 0, 1) == 1;
    if (o.has("isa")) {
        const isa cap = parse_isa(o.get("isa", ""), "--isa");
        set_max_cpu_isa(cap);
        // oneDNN reads its cap once, at its first dispatch: set it before any use.
        setenv("ONEDNN_MAX_CPU_ISA", impl::isa_level_of(cap).onednn_cap, 0);
    }
    if (c.threads > 0) impl::set_openmp_threads(c.threads);
    return c;
}

// ------------------------------------------------------------- batch files
int64_t multiplicity(const std::string &text) {
    const auto q1 = text.find('"');
    if (q1 == std::string::npos) return 1;
    const auto q2 = text.find('"', q1 + 1);
    const std::string name = text.substr(q1 + 1, q2 == std::string::npos ? std::string::npos : q2 - q1 - 1);
    const auto star = name.rfind('*');
    if (star == std::string::npos) return 1;
    // `*` then a number (signed or not) is a count; `*` then other text is part of the name.
    const std::string n = name.substr(star + 1);
    size_t i = n.size() > 0 && (n[0] == '-' || n[0] == '+') ? 1 : 0;
    if (i == n.size() || n.find_first_not_of("0123456789", i) != std::string::npos) return 1;
    int64_t v = 0;
    for (; i < n.size() && v <= max_count; ++i) v = v * 10 + (n[i] - '0');
    if (n[0] == '-' || v < 1 || v > max_count)
        throw usage_error("name \"" + name + "\": the count *N must be in [1, " + std::to_string(max_count) +
                          "] (got '*" + n + "')");
    return v;
}

namespace {
// One line of a batch file; the file's size and line length are bounded
// (batch_max_bytes, batch_max_line) so /dev/zero or a stray binary file is
// refused after a bounded read instead of filling memory.
class bounded_lines {
public:
    bounded_lines(std::FILE *f, const std::string &path) : f_(f), path_(path) {}
    bool next(std::string *line) {
        line->clear();
        for (int c; (c = std::getc(f_)) != EOF;) {
            if (++total_ > batch_max_bytes)
                throw usage_error("--batch: '" + path_ + "' is larger than the limit of " +
                                  std::to_string(batch_max_bytes >> 20) + " MiB");
            if (c == '\n') return true;
            if (c == '\0')
                throw usage_error("--batch: " + path_ + ":" + std::to_string(lineno_ + 1) +
                                  ": a NUL byte (not a text file)");
            if (line->size() >= batch_max_line)
                throw usage_error("--batch: " + path_ + ":" + std::to_string(lineno_ + 1) + ": line longer than " +
                                  std::to_string(batch_max_line) + " bytes");
            line->push_back(static_cast<char>(c));
        }
        if (std::ferror(f_)) throw usage_error("--batch: error reading '" + path_ + "'");
        return !line->empty();
    }
    int lineno() const { return lineno_; }
    void count_line() { ++lineno_; }

private:
    std::FILE *f_;
    std::string path_;
    int64_t total_ = 0;
    int lineno_ = 0;
};
} // namespace

std::vector<problem_text> read_batch_file(const std::string &path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) throw usage_error("--batch: cannot open '" + path + "'");
    if (S_ISDIR(st.st_mode)) throw usage_error("--batch: '" + path + "' is a directory");
    if (S_ISREG(st.st_mode) && st.st_size > batch_max_bytes)
        throw usage_error("--batch: '" + path + "' is larger than the limit of " +
                          std::to_string(batch_max_bytes >> 20) + " MiB");
    std::unique_ptr<std::FILE, int (*)(std::FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) throw usage_error("--batch: cannot open '" + path + "'");
    std::vector<problem_text> out;
    bounded_lines in(f.get(), path);
    std::string line;
    while (in.next(&line)) {
        in.count_line();
        const std::string where = path + ":" + std::to_string(in.lineno());
        // '#' starts a comment unless it is inside the quoted name.
        bool quoted = false;
        for (size_t i = 0; i < line.size(); ++i) {
            if (line[i] == '"') quoted = !quoted;
            if (line[i] == '#' && !quoted) {
                line.resize(i);
                break;
            }
        }
        line = detail::trim(line);
        if (line.empty()) continue;
        if (line.find_first_of(" \t") != std::string::npos)
            throw usage_error(where + ": one problem per line expected (got '" + line + "')");
        try {
            out.push_back({line, multiplicity(line), where});
        } catch (const usage_error &e) {
            throw usage_error(where + ": " + e.what());
        }
    }
    return out;
}

std::vector<problem_text> collect_problems(const options &o) {
    std::vector<problem_text> out;
    for (const auto &w : o.words()) {
        try {
            out.push_back({w, multiplicity(w), "problem '" + w + "'"});
        } catch (const usage_error &e) {
            throw usage_error("problem '" + w + "': " + e.what());
        }
    }
    for (const auto &f : o.all("batch")) {
        auto b = read_batch_file(f);
        out.insert(out.end(), b.begin(), b.end());
    }
    return out;
}

void check_problem_memory(const std::vector<std::pair<std::string, double>> &parts) {
    double total = 0;
    size_t largest = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
        total += parts[i].second;
        if (parts[i].second > parts[largest].second) largest = i;
    }
    if (parts.empty()) return;
    std::string what = "the problem's data (";
    for (size_t i = 0; i < parts.size(); ++i)
        what += (i ? ", " : "") + parts[i].first + " " + impl::bytes_text(parts[i].second);
    impl::check_memory(total, parts[largest].first, what + ")", max_problem_bytes,
                       "the driver's limit of " + impl::bytes_text(max_problem_bytes) + " per problem");
}

// The implementations to run: "auto", one name, a comma-separated list or "all".
std::vector<std::string> selected_impls(const std::string &impl, const std::vector<std::string> &names) {
    if (impl == "all") return names;
    if (impl == "auto") return {"auto"};
    std::vector<std::string> out;
    size_t b = 0;
    for (;;) {
        const size_t e = impl.find(',', b);
        const std::string n = impl.substr(b, e == std::string::npos ? std::string::npos : e - b);
        if (n != "auto" && std::find(names.begin(), names.end(), n) == names.end()) {
            std::string valid;
            for (const auto &x : names) valid += " " + x;
            throw usage_error("--impl: unknown implementation '" + n + "' (valid: auto all list" + valid + ")");
        }
        out.push_back(n);
        if (e == std::string::npos) return out;
        b = e + 1;
    }
}

} // namespace qconv::driver
