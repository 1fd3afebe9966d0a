#include "kernels/onednn/conv_post_ops.h"

namespace qconv::impl::onednn {

using dnnl::algorithm;

algorithm to_dnnl(eltwise_alg a) {
    switch (a) {
    case eltwise_alg::relu: return algorithm::eltwise_relu;
    case eltwise_alg::clip: return algorithm::eltwise_clip;
    case eltwise_alg::linear: return algorithm::eltwise_linear;
    case eltwise_alg::gelu_erf: return algorithm::eltwise_gelu_erf;
    case eltwise_alg::gelu_tanh: return algorithm::eltwise_gelu_tanh;
    case eltwise_alg::swish: return algorithm::eltwise_swish;
    case eltwise_alg::hardswish: return algorithm::eltwise_hardswish;
    case eltwise_alg::mish: return algorithm::eltwise_mish;
    case eltwise_alg::logistic: return algorithm::eltwise_logistic;
    case eltwise_alg::tanh: return algorithm::eltwise_tanh;
    case eltwise_alg::elu: return algorithm::eltwise_elu;
    case eltwise_alg::abs: return algorithm::eltwise_abs;
    case eltwise_alg::sqrt: return algorithm::eltwise_sqrt;
    case eltwise_alg::square: return algorithm::eltwise_square;
    case eltwise_alg::exp: return algorithm::eltwise_exp;
    case eltwise_alg::round: return algorithm::eltwise_round;
    }
    return algorithm::undef;
}

// Whether the algorithm reads alpha or beta (docs/semantics.md §5).
bool takes_parameters(eltwise_alg a) {
    switch (a) {
    case eltwise_alg::relu:
    case eltwise_alg::clip:
    case eltwise_alg::linear:
    case eltwise_alg::swish:
    case eltwise_alg::elu: return true;
    default: return false;
    }
}

algorithm to_dnnl(binary_alg a) {
    switch (a) {
    case binary_alg::add: return algorithm::binary_add;
    case binary_alg::sub: return algorithm::binary_sub;
    case binary_alg::mul: return algorithm::binary_mul;
    case binary_alg::div: return algorithm::binary_div;
    case binary_alg::max: return algorithm::binary_max;
    case binary_alg::min: return algorithm::binary_min;
    }
    return algorithm::undef;
}

} // namespace qconv::impl::onednn
