// conv_desc: benchdnn problem syntax, canonical printing and validation.
//
// Parsing resolves each spatial dimension (h, then w) from the keys given:
//  - a text with w keys only is a 1-D problem: ih = kh = oh = 1 (benchdnn);
//  - w keys default to their h counterparts (iw=ih, kw=kh, sw=sh, pw=ph,
//    dw=dh); ow defaults to oh only when the whole w dimension mirrors h,
//    otherwise it is derived from the w keys like a missing oh;
//  - a missing output size is derived with symmetric padding (pb = pt):
//      oh = (ih + 2·pt − kh_extent) / sh + 1
//  - a given output size fixes the bottom pad:
//      pb = (oh − 1)·sh + kh_extent − ih − pt
//    which must satisfy pb > −sh (a negative pb skips input rows no window
//    reads); a large pb is valid: the last output rows then read nothing but
//    padding and are the bias (and post-ops) of a zero sum, as the first
//    rows are under a top pad of kh_extent or more (docs/semantics.md §2);
//  - a given oh without ph derives the top pad as benchdnn does:
//      pt = max(0, ((oh − 1)·sh − ih + kh_extent) / 2)
//    (any odd remainder goes to the bottom pad, as TensorFlow's SAME does).
// Text dilation is 0-based (dh0 = dense); the struct holds 1-based values.
//
// The bottom/right pads are implied by the other fields: any pb with the same
// oh describes the same computation (rows beyond the last window are never
// read). operator== therefore compares every field except pb and pr, which
// makes parse(str(x)) == x hold for every valid x.
#include "qconv/conv_desc.h"

#include <algorithm>
#include <optional>

#include "core/desc_text.h"
#include "qconv/types.h"

namespace qconv {
namespace {

using detail::checked_add;
using detail::checked_mul;
using detail::checked_sub;
using detail::size_limit;
using opt = std::optional<int64_t>;

struct dim_names {
    const char *i, *o, *k, *s, *p, *d;
};
constexpr dim_names h_names{"ih", "oh", "kh", "sh", "ph", "dh"};
constexpr dim_names w_names{"iw", "ow", "kw", "sw", "pw", "dw"};

// One spatial dimension as written in the text (dilation 0-based).
struct dim_text {
    opt i, o, k, s, p, d;
};

struct dim_result {
    int64_t i, o, k, s, pt, pb, d; // d 1-based
};

void check_range(const char *field, int64_t v, int64_t lo) {
    if (v < lo)
        fail(field,
             std::string(lo == 1 ? "must be positive" : "must be non-negative") + " (got " + std::to_string(v) + ")");
    if (v > size_limit) fail(field, std::to_string(v) + " exceeds the size limit 2^40");
}

int64_t kernel_extent(int64_t k, int64_t dil, const char *dfield, const char *kfield) {
    const std::string what = std::string("kernel extent (") + kfield + "-1)*" + dfield + "+1";
    return checked_add(checked_mul(k - 1, dil, dfield, what), 1, dfield, what);
}

dim_result solve_dim(const dim_text &t, const dim_names &n) {
    if (!t.i) fail(n.i, "missing (the input size is required)");
    if (!t.k) fail(n.k, "missing (the kernel size is required)");
    dim_result r{};
    r.i = *t.i;
    r.k = *t.k;
    r.s = t.s.value_or(1);
    const int64_t d0 = t.d.value_or(0);
    check_range(n.i, r.i, 1);
    check_range(n.k, r.k, 1);
    check_range(n.s, r.s, 1);
    check_range(n.d, d0, 0);
    r.d = d0 + 1;
    if (t.p) check_range(n.p, *t.p, 0);
    if (t.o) check_range(n.o, *t.o, 1);
    const int64_t kext = kernel_extent(r.k, r.d, n.d, n.k);

    if (!t.o) {
        r.pt = r.pb = t.p.value_or(0);
        const int64_t padded = r.i + 2 * r.pt; // both <= 2^40: no overflow
        if (padded < kext)
            fail(n.k, std::string("kernel larger than padded input (") + n.i + " + 2*" + n.p + " = " +
                          std::to_string(padded) + " < kernel extent " + std::to_string(kext) + ")");
        r.o = (padded - kext) / r.s + 1;
        return r;
    }
    r.o = *t.o;
    const std::string what = std::string("(") + n.o + "-1)*" + n.s;
    const int64_t span = checked_add(checked_mul(r.o - 1, r.s, n.o, what), kext, n.o, what);
    r.pt = t.p ? *t.p : std::max<int64_t>(0, (span - r.i) / 2);
    r.pb = span - r.i - r.pt;
    if (r.pb <= -r.s)
        fail(n.o, "inconsistent output size: " + std::string(n.i) + "=" + std::to_string(r.i) + " " + n.k + "=" +
                      std::to_string(r.k) + " " + n.s + "=" + std::to_string(r.s) + " " + n.d + "=" +
                      std::to_string(d0) + " " + n.p + "=" + std::to_string(r.pt) + " cannot give " + n.o + "=" +
                      std::to_string(r.o) + " (implied end pad " + std::to_string(r.pb) + " is not above -" +
                      std::to_string(r.s) + ")");
    if (r.pb > size_limit)
        fail(n.o, std::string("implied end pad ") + std::to_string(r.pb) + " exceeds the size limit 2^40");
    return r;
}

// Validation of one dimension of a built descriptor.
void validate_dim(int64_t i, int64_t o, int64_t k, int64_t s, int64_t pt, int64_t pb, int64_t d, const dim_names &n,
                  const char *pt_name, const char *pb_name) {
    check_range(n.i, i, 1);
    check_range(n.o, o, 1);
    check_range(n.k, k, 1);
    check_range(n.s, s, 1);
    check_range(n.d, d, 1);
    check_range(pt_name, pt, 0);
    if (pb < -size_limit || pb > size_limit) fail(pb_name, std::to_string(pb) + " exceeds the size limit 2^40");
    const int64_t kext = kernel_extent(k, d, n.d, n.k);
    const int64_t padded = i + pt + pb; // each within ±2^40
    if (padded < kext)
        fail(n.k, std::string("kernel larger than padded input (") + n.i + " + " + pt_name + " + " + pb_name + " = " +
                      std::to_string(padded) + " < kernel extent " + std::to_string(kext) + ")");
    const int64_t expect = (padded - kext) / s + 1;
    const std::string what = std::string("(") + n.o + "-1)*" + n.s;
    const int64_t pb_min =
        checked_sub(checked_add(checked_mul(o - 1, s, n.o, what), kext, n.o, what), i + pt, n.o, what);
    if (o != expect)
        fail(n.o, "inconsistent output size: " + std::string(n.o) + "=" + std::to_string(o) + " but " + n.i + "=" +
                      std::to_string(i) + " " + n.k + "=" + std::to_string(k) + " " + n.s + "=" + std::to_string(s) +
                      " dilation=" + std::to_string(d) + " pads " + std::to_string(pt) + "," + std::to_string(pb) +
                      " give " + std::to_string(expect));
    // Any end pad at or above kext (pad-only last outputs) is valid.
    if (pb_min <= -s)
        fail(n.o, std::string(n.o) + "=" + std::to_string(o) + " implies an end pad of " + std::to_string(pb_min) +
                      ", not above -" + n.s + " = " + std::to_string(-s));
}

const char *const known_keys[] = {"g",  "mb", "ic", "ih", "iw", "oc", "oh", "ow", "kh",
                                  "kw", "sh", "sw", "ph", "pw", "dh", "dw", "n"};
const char *const keys_3d[] = {"id", "od", "kd", "sd", "pd", "dd"};

} // namespace

conv_desc conv_desc::parse(const std::string &text_in) {
    const std::string text = detail::trim(text_in);
    const auto tokens = detail::tokenize_desc(text, /*allow_name=*/true, [&](const std::string &key) {
        for (const char *k3 : keys_3d)
            if (key == k3) fail(key, "3-D problems are not supported (key '" + key + "' in '" + text + "')");
        if (std::find_if(std::begin(known_keys), std::end(known_keys), [&](const char *k) { return key == k; }) ==
            std::end(known_keys))
            fail("desc", "unknown key '" + key + "' in '" + text + "'");
    });

    opt g, mb, ic, oc;
    dim_text h, w;
    std::string name;
    for (const auto &t : tokens) {
        const int64_t v = t.value;
        const std::string &k = t.key;
        if (k == "n") name = t.name;
        else if (k == "g") g = v;
        else if (k == "mb") mb = v;
        else if (k == "ic") ic = v;
        else if (k == "oc") oc = v;
        else if (k == "ih") h.i = v;
        else if (k == "oh") h.o = v;
        else if (k == "kh") h.k = v;
        else if (k == "sh") h.s = v;
        else if (k == "ph") h.p = v;
        else if (k == "dh") h.d = v;
        else if (k == "iw") w.i = v;
        else if (k == "ow") w.o = v;
        else if (k == "kw") w.k = v;
        else if (k == "sw") w.s = v;
        else if (k == "pw") w.p = v;
        else if (k == "dw") w.d = v;
    }
    if (!ic) fail("ic", "missing (the input channel count is required)");
    if (!oc) fail("oc", "missing (the output channel count is required)");

    // A 1-D problem (w keys only, as in benchdnn) has a height of 1.
    const bool no_h = !h.i && !h.o && !h.k && !h.s && !h.p && !h.d;
    const bool no_w = !w.i && !w.o && !w.k && !w.s && !w.p && !w.d;
    if (no_h && !no_w) {
        h.i = h.k = 1;
    } else {
        // Square defaults: w keys default to h; ow mirrors oh only when all of w does.
        if (!w.i) w.i = h.i;
        if (!w.k) w.k = h.k;
        if (!w.s) w.s = h.s;
        if (!w.p) w.p = h.p;
        if (!w.d) w.d = h.d;
        if (!w.o && h.o && w.i == h.i && w.k == h.k && w.s == h.s && w.p == h.p && w.d == h.d) w.o = h.o;
    }

    conv_desc d;
    d.g = g.value_or(1);
    d.mb = mb.value_or(2);
    d.ic = *ic;
    d.oc = *oc;
    check_range("g", d.g, 1);
    check_range("mb", d.mb, 1);
    check_range("ic", d.ic, 1);
    check_range("oc", d.oc, 1);
    const dim_result rh = solve_dim(h, h_names);
    const dim_result rw = solve_dim(w, w_names);
    d.ih = rh.i, d.oh = rh.o, d.kh = rh.k, d.sh = rh.s, d.pt = rh.pt, d.pb = rh.pb, d.dh = rh.d;
    d.iw = rw.i, d.ow = rw.o, d.kw = rw.k, d.sw = rw.s, d.pl = rw.pt, d.pr = rw.pb, d.dw = rw.d;
    d.name = name;
    d.validate();
    return d;
}

std::string conv_desc::str() const {
    auto f = [](const char *k, int64_t v) { return k + std::to_string(v); };
    std::string s = f("g", g) + f("mb", mb) + f("ic", ic) + f("ih", ih) + f("iw", iw) + f("oc", oc) + f("oh", oh) +
                    f("ow", ow) + f("kh", kh) + f("kw", kw) + f("sh", sh) + f("sw", sw) + f("ph", pt) + f("pw", pl) +
                    f("dh", dh - 1) + f("dw", dw - 1);
    if (!name.empty()) s += "n\"" + name + "\"";
    return s;
}

void conv_desc::validate() const {
    check_range("g", g, 1);
    check_range("mb", mb, 1);
    check_range("ic", ic, 1);
    check_range("oc", oc, 1);
    if (ic % g != 0) fail("g", "groups do not divide ic (g=" + std::to_string(g) + ", ic=" + std::to_string(ic) + ")");
    if (oc % g != 0) fail("g", "groups do not divide oc (g=" + std::to_string(g) + ", oc=" + std::to_string(oc) + ")");
    validate_dim(ih, oh, kh, sh, pt, pb, dh, h_names, "pt", "pb");
    validate_dim(iw, ow, kw, sw, pl, pr, dw, w_names, "pl", "pr");
    detail::checked_elems({mb, ih, iw, ic}, "src", "mb*ih*iw*ic");
    detail::checked_elems({mb, oh, ow, oc}, "dst", "mb*oh*ow*oc");
    detail::checked_elems({oc, ic / g, kh, kw}, "wei", "oc*(ic/g)*kh*kw");
    if (name.find('"') != std::string::npos) fail("n", "the name must not contain '\"'");
}

double conv_desc::ops() const {
    return 2.0 * double(mb) * double(oh) * double(ow) * double(oc) * double(icg()) * double(kh) * double(kw);
}

bool conv_desc::operator==(const conv_desc &o) const {
    // pb/pr are implied by the other fields (see the comment at the top).
    return g == o.g && mb == o.mb && ic == o.ic && ih == o.ih && iw == o.iw && oc == o.oc && oh == o.oh && ow == o.ow &&
           kh == o.kh && kw == o.kw && sh == o.sh && sw == o.sw && pt == o.pt && pl == o.pl && dh == o.dh &&
           dw == o.dw && name == o.name;
}

} // namespace qconv
