// Convolution problem shape in oneDNN benchdnn's descriptor syntax.
//
//   g1mb1ic64ih56oc64oh56kh3ph1n"resnet:res2a"
//
// Keys: g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw, an optional name n"..."
// and optional '_' between fields. Defaults follow benchdnn: g=1, mb=2, iw=ih,
// ow=oh, kw=kh, sw=sh, pw=ph, stride 1, pad 0, dilation 0. Dilation in the
// text is 0-based (dh0 = dense); in this struct it is 1-based (dh=1 = dense).
// Missing oh/ow are derived with symmetric padding; given oh/ow determine the
// bottom/right pads (which may be negative by less than the stride, as when a
// strided 1x1 conv skips the last row). Only 2-D problems are supported.
#pragma once

#include <cstdint>
#include <string>

namespace qconv {

struct conv_desc {
    int64_t g = 1, mb = 2;
    int64_t ic = 0, ih = 0, iw = 0;
    int64_t oc = 0, oh = 0, ow = 0;
    int64_t kh = 0, kw = 0;
    int64_t sh = 1, sw = 1;
    int64_t pt = 0, pl = 0, pb = 0, pr = 0; // top, left, bottom, right
    int64_t dh = 1, dw = 1;                 // 1 = dense
    std::string name;

    // Parses and validates; throws qconv::error naming the field.
    static conv_desc parse(const std::string &text);
    // Canonical benchdnn text; parse(str()) == *this.
    std::string str() const;
    // Throws qconv::error naming the first inconsistent field.
    void validate() const;

    int64_t icg() const { return ic / g; }
    int64_t ocg() const { return oc / g; }
    bool is_depthwise() const { return g > 1 && g == ic && g == oc; }
    int64_t kh_extent() const { return (kh - 1) * dh + 1; }
    int64_t kw_extent() const { return (kw - 1) * dw + 1; }
    int64_t src_elems() const { return mb * ih * iw * ic; }
    int64_t dst_elems() const { return mb * oh * ow * oc; }
    int64_t wei_elems() const { return oc * icg() * kh * kw; }
    // Multiply-adds counted as 2 ops: 2·mb·oh·ow·oc·icg·kh·kw.
    double ops() const;

    bool operator==(const conv_desc &o) const;
    bool operator!=(const conv_desc &o) const { return !(*this == o); }
};

} // namespace qconv
