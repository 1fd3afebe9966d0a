// The thread count qconv runs with, bounded (qconv::max_threads), and the
// check of every environment setting at once (qconv::check_environment(),
// dispatch/environment.cpp).
#pragma once

namespace qconv::impl {

// Throws qconv::error when OpenMP would start more than max_threads threads
// for a parallel region of the calling thread (OMP_NUM_THREADS when it is set,
// else omp_set_num_threads): called when a primitive is created.
void check_openmp_threads();
// Throws qconv::error("threads", ...) when an execute() asks for more than
// max_threads (0 or less: OpenMP's default).
void check_threads_argument(int threads);

} // namespace qconv::impl
