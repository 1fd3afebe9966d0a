// The rows' supports(): the declared CPU features first, then the row's own
// decision (rows/row.h).
#include "rows/row.h"

namespace qconv::impl {

namespace {
// The row's feature check, then its own decision.
template <class Entry, class... Args>
plan_ptr decide_on(const Entry &e, const platform &pl, std::string *why, const Args &...args) {
    if (!pl.has_all(e.needs)) {
        reject(why, "needs " + e.needs.str() + "; platform " + pl.str() + " lacks " + pl.features.missing(e.needs));
        return nullptr;
    }
    return e.decide(args..., pl, why);
}
} // namespace

plan_ptr conv_entry::supports(const conv_problem &p, const attr_set &attr, const platform &pl, std::string *why) const {
    return decide_on(*this, pl, why, p, attr);
}

plan_ptr matmul_entry::supports(const matmul_desc &d, const matmul_hints &h, const platform &pl,
                                std::string *why) const {
    return decide_on(*this, pl, why, d, h);
}

} // namespace qconv::impl
