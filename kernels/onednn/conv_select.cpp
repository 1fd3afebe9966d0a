#include "kernels/onednn/conv_select.h"

#include "kernels/onednn/known_wrong.h"
#include "kernels/onednn/onednn_util.h"

namespace qconv::impl::onednn {

namespace {
// oneDNN 2.6.3 can offer a descriptor whose primitive it then fails to
// create (a grouped conv with a dilated kernel and a FakeQuantize chain:
// "could not create a primitive"); the selection steps past it to the next
// implementation. Creation goes through oneDNN's primitive cache, so the
// kernel's own creation of the same descriptor later is a cache hit.
bool creatable(const pd_t &pd) {
    try {
        dnnl::convolution_forward prim(pd);
        return true;
    } catch (const dnnl::error &) {
        return false;
    }
}
} // namespace

bool parse_impl_info(const std::string &info, std::string *kind, isa *level) {
    const size_t colon = info.find(':');
    if (colon == std::string::npos) return false;
    std::string k = info.substr(0, colon), i = info.substr(colon + 1);
    if (k == "brg") k = "brgconv";
    const std::string suffix = "_int8";
    if (i.size() > suffix.size() && i.compare(i.size() - suffix.size(), suffix.size(), suffix) == 0)
        i.resize(i.size() - suffix.size());
    try {
        *level = parse_isa(i);
    } catch (const error &) {
        return false;
    }
    *kind = k;
    return true;
}

// Whether the row takes oneDNN's implementation `info`; *wrong is set when
// it is refused as known wrong.
bool accepts(const selector &sel, const std::string &info, const recipe &r, std::string *wrong) {
    *wrong = known_wrong(info, r);
    if (wrong->empty() && sel.first && brgconv_on_amx(info)) *wrong = brgconv_amx_untrusted;
    if (!wrong->empty()) return false;
    if (sel.first) return true;
    std::string kind;
    isa level;
    return parse_impl_info(info, &kind, &level) && kind == sel.kind && level == sel.level;
}

// Creates the primitive descriptor positioned on the selector's
// implementation, with oneDNN planning for `threads` threads.
std::optional<pd_t> select_pd(const selector &sel, const recipe &r, int threads, std::string *why) {
    threads_guard guard(threads);
    std::optional<pd_t> pd;
    std::string offered;
    const bool ok = try_dnnl(
        [&] {
            pd.emplace(r.desc, r.attr, cpu_engine(), true);
            if (!*pd) return;
            do {
                const std::string info = pd->impl_info_str();
                std::string wrong;
                if (accepts(sel, info, r, &wrong)) {
                    if (creatable(*pd)) return;
                    offered += (offered.empty() ? "" : ", ") + info + " (its primitive cannot be created)";
                    continue;
                }
                offered += (offered.empty() ? "" : ", ") + info + (wrong.empty() ? "" : " (refused: " + wrong + ")");
            } while (pd->next_impl());
            pd.reset();
        },
        why, "oneDNN primitive descriptor");
    if (!ok) return std::nullopt;
    if (!pd || !*pd) {
        reject(why, "oneDNN offers no " +
                        (sel.first ? std::string("implementation") : sel.kind + ":" + to_string(sel.level)) +
                        " (offered: " + (offered.empty() ? std::string("none") : offered) + ")");
        return std::nullopt;
    }
    return pd;
}

bool attr_allowed(const selector &sel, const attr_set &attr, std::string *why) {
    if (attr.zp == zp_mechanism::legacy_per_channel)
        return reject(
            why,
            "legacy zero point (zp bytes in the padding + compensation): oneDNN 2.6 has only the stock per-tensor one");
    if (!sel.first && attr.id == 0 && attr.has_legacy_ops())
        return reject(why,
                      "attr[0] carries legacy post-ops (the JIT kernels' set); brgconv takes them only in attr[1]");
    return true;
}

} // namespace qconv::impl::onednn
