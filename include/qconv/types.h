// Basic vocabulary of qconv: element types, the error type, and CPU ISA levels.
//
// Every validation failure in qconv throws qconv::error (an std::invalid_argument)
// whose message starts with the name of the offending field, e.g.
//   "ic: must be positive (got 0)".
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace qconv {

class error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// Throws qconv::error("<field>: <what>").
[[noreturn]] void fail(const std::string &field, const std::string &what);

// The one element-type enum of the project: kernels, descriptors and the graph.
enum class dtype { undef, f32, bf16, f16, s32, s8, u8, s4, u4, s64 };

// The kernels' names: "f32", "s8", "s32", "u4", ...
const char *to_string(dtype dt);
// The graph text format's names (OpenVINO's): "i8", "i32", "i64", "i4"; the rest as to_string.
const char *ir_name(dtype dt);
// Parses either name ("s8" or "i8", ...); throws an error naming `field` otherwise.
dtype parse_dtype(const std::string &s, const std::string &field = "dt");
// Size of one element in bits (4 for u4/s4).
int bits_of(dtype dt);
bool is_integer(dtype dt);
// Bytes that `elems` packed elements take (two 4-bit values per byte).
int64_t storage_bytes(dtype dt, int64_t elems);

// IEEE half precision: f32 → f16 rounds to nearest even (overflow → inf,
// NaN stays NaN); f16 → f32 is exact.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
// bfloat16 (the top half of an f32): f32 → bf16 rounds to nearest even
// (overflow → inf, NaN stays NaN, quieted); bf16 → f32 is exact.
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

// CPU ISA levels, ordered: each level includes everything below it.
enum class isa {
    sse41,
    avx2,
    avx2_vnni,
    avx512_core, // AVX-512 F+BW+DQ+VL
    avx512_core_vnni,
    avx512_core_bf16,
    avx512_core_amx,
};

const char *to_string(isa i);
// Accepts the names above (case-insensitive); an unknown name throws an
// error listing the valid ones.
isa parse_isa(const std::string &s, const std::string &field = "isa");

// The ISA qconv uses: what the CPU (and OS) support, capped by
// QCONV_MAX_CPU_ISA or set_max_cpu_isa(). Detected once per process.
isa max_cpu_isa();
// Lowers the cap (as oneDNN's ONEDNN_MAX_CPU_ISA). Overrides the environment.
void set_max_cpu_isa(isa cap);

// The most threads qconv runs with: an execute() asking for more, and a
// primitive created while OpenMP would start more (OMP_NUM_THREADS,
// omp_set_num_threads), are errors naming the setting. OpenMP runtimes crash
// starting tens of thousands of threads; no CPU qconv runs on has 4096.
constexpr int max_threads = 4096;

// Reads every setting qconv takes from the environment and throws
// qconv::error naming the first variable whose value is invalid:
// QCONV_MAX_CPU_ISA (an ISA name), QCONV_CACHE_CAPACITY (a non-negative
// integer), QCONV_DISPATCH (default or tune), QCONV_VERBOSE (a non-negative
// integer) and OMP_NUM_THREADS (a list of integers in [1, max_threads]).
// Primitives refuse the QCONV_ ones when they are first created and a thread
// count above max_threads; this checks them all at once, before anything runs
// (qconv-driver calls it at start-up).
void check_environment();

// Storage aligned to a 64-byte cache line. The AMX rows load a tile row of 64
// source bytes with one access: from a buffer that is not 64-byte aligned
// every row straddles two cache lines, and the tile loads of a 1x1 layer that
// reads the source in place run ~3x slower (docs/jit_conv_amx.md, "Alignment").
// The graph executor's tensors and the driver's buffers use it; a caller of
// the primitives gets full speed by passing such buffers (any alignment is
// correct).
template <class T>
struct cacheline_allocator {
    using value_type = T;
    static constexpr std::align_val_t alignment{64};
    cacheline_allocator() = default;
    template <class U>
    cacheline_allocator(const cacheline_allocator<U> &) {}
    T *allocate(std::size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), alignment)); }
    void deallocate(T *p, std::size_t) { ::operator delete(p, alignment); }
    template <class U>
    bool operator==(const cacheline_allocator<U> &) const {
        return true;
    }
    template <class U>
    bool operator!=(const cacheline_allocator<U> &) const {
        return false;
    }
};
template <class T>
using aligned_vector = std::vector<T, cacheline_allocator<T>>;

} // namespace qconv
