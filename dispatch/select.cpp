// Selection: the walk over an implementation table (see dispatcher.h).
#include "dispatch/dispatcher.h"

#include "dispatch/attr_builder.h"
#include "dispatch/verbose.h"

namespace qconv::impl {
namespace {

template <class Entry>
std::string valid_names(const std::vector<Entry> &list) {
    std::string s = "auto";
    for (const auto &e : list) s += ", " + e.name;
    return s;
}

template <class Entry>
const Entry *find_entry(const std::vector<Entry> &list, const std::string &name) {
    for (const auto &e : list)
        if (e.name == name) return &e;
    fail("impl", "unknown implementation '" + name + "' (valid: " + valid_names(list) + ")");
}

std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const auto &x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
}

// Records one rejection (and prints it at verbose level 2).
void note_skip(std::vector<std::string> &out, const std::string &name, int attr_id, const std::string &why) {
    const std::string attr = attr_id >= 0 ? "attr[" + std::to_string(attr_id) + "]" : "-";
    const std::string reason = why.empty() ? "not supported" : why;
    if (verbose_level() >= 2) verbose_print("skip," + name + "," + attr + "," + reason);
    out.push_back(name + " " + attr + ": " + reason);
}

} // namespace

bool is_auto(const std::string &impl) { return impl.empty() || impl == "auto"; }
const conv_entry &conv_row_named(const std::string &name) { return *find_entry(conv_list(), name); }
const matmul_entry &matmul_row_named(const std::string &name) { return *find_entry(matmul_list(), name); }

// ------------------------------------------------------------------ select

namespace {
// The plan of an accepted candidate, at verbose level 2.
void note_plan(const std::string &name, int attr_id, const plan &pl) {
    if (verbose_level() < 2) return;
    const std::string attr = attr_id >= 0 ? "attr[" + std::to_string(attr_id) + "]" : "-";
    verbose_print("plan," + name + "," + attr + "," + pl.str());
}
} // namespace

namespace {
// The walk both tables share: the rows in order (only the named one when
// forced; peers only when forced), each offered to `take(e, forced,
// skipped)`, which returns true when the row takes the problem (noting its
// refusals in `skipped` otherwise). The rejections of the rows before go to
// *rejections; when no row takes the problem, a qconv::error naming each.
template <class Entry, class Take>
void walk(const std::vector<Entry> &list, const std::string &impl, const platform &plat,
          std::vector<std::string> *rejections, Take take) {
    std::vector<std::string> skipped;
    const bool forced = !is_auto(impl);
    const Entry *only = forced ? find_entry(list, impl) : nullptr;
    for (const auto &e : list) {
        if (only && &e != only) continue;
        if (!forced && e.peer) {
            note_skip(skipped, e.name, -1, "peer: runs only when forced by name");
            continue;
        }
        if (take(e, forced, skipped)) {
            if (rejections) *rejections = std::move(skipped);
            return;
        }
    }
    if (rejections) *rejections = skipped;
    if (forced) fail("impl", "'" + impl + "' does not support this problem on " + plat.str() + ": " + join(skipped));
    fail("impl", "no implementation supports this problem on " + plat.str() + ": " + join(skipped));
}
} // namespace

conv_choice select_conv_in(const std::vector<conv_entry> &list, const std::vector<attr_set> &attrs,
                           const conv_problem &p, const platform &plat, const conv_hints &hints,
                           std::vector<std::string> *rejections) {
    conv_choice choice;
    walk(list, hints.impl, plat, rejections, [&](const conv_entry &e, bool forced, std::vector<std::string> &skipped) {
        for (size_t a = 0; a < attrs.size(); ++a) {
            std::string why;
            if (plan_ptr pl = e.supports(p, attrs[a], plat, &why)) {
                const std::string deferred = !forced && e.defer ? e.defer(p, attrs[a], plat, *pl) : std::string();
                if (deferred.empty()) {
                    note_plan(e.name, static_cast<int>(a), *pl);
                    choice = {&e, e.name, static_cast<int>(a), attrs[a], std::move(pl)};
                    return true;
                }
                why = "deferred to the rows below: " + deferred;
            }
            note_skip(skipped, e.name, static_cast<int>(a), why);
        }
        return false;
    });
    return choice;
}

std::vector<attr_set> conv_attrs(const conv_problem &p, const platform &plat, const conv_hints &hints) {
    const conv_entry *forced = is_auto(hints.impl) ? nullptr : find_entry(conv_list(), hints.impl);
    return forced && forced->peer ? build_attrs_for_peer(p, plat, hints) : build_attrs(p, plat, hints);
}

conv_choice select_conv(const conv_problem &p, const platform &plat, const conv_hints &hints,
                        std::vector<std::string> *rejections) {
    return select_conv_in(conv_list(), conv_attrs(p, plat, hints), p, plat, hints, rejections);
}

std::vector<conv_choice> accepting_conv(const std::vector<conv_entry> &list, const std::vector<attr_set> &attrs,
                                        const conv_problem &p, const platform &plat) {
    std::vector<conv_choice> out;
    for (const auto &e : list) {
        if (e.peer) continue;
        for (size_t a = 0; a < attrs.size(); ++a)
            if (plan_ptr pl = e.supports(p, attrs[a], plat, nullptr)) {
                out.push_back({&e, e.name, static_cast<int>(a), attrs[a], std::move(pl)});
                break;
            }
    }
    return out;
}

matmul_choice select_matmul_in(const std::vector<matmul_entry> &list, const matmul_desc &d, const matmul_hints &hints,
                               const platform &plat, std::vector<std::string> *rejections) {
    matmul_choice choice;
    walk(list, hints.impl, plat, rejections, [&](const matmul_entry &e, bool, std::vector<std::string> &skipped) {
        std::string why;
        if (plan_ptr pl = e.supports(d, hints, plat, &why)) {
            note_plan(e.name, -1, *pl);
            choice = {&e, e.name, std::move(pl)};
            return true;
        }
        note_skip(skipped, e.name, -1, why);
        return false;
    });
    return choice;
}

matmul_choice select_matmul(const matmul_desc &d, const matmul_hints &hints, const platform &plat,
                            std::vector<std::string> *rejections) {
    return select_matmul_in(matmul_list(), d, hints, plat, rejections);
}

} // namespace qconv::impl
