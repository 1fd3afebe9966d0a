// The kernel cache: a created kernel is shared by every primitive with the
// same key — (problem key, attribute set, ISA, implementation name) — so a
// primitive created again (or from another thread) reuses the compiled code
// and only packs its own weights.
//
// Thread-safe: concurrent creators of one key build it once (the first one
// builds; the others wait on a shared future and get the same object). A
// creation that throws is removed, so a later attempt retries. Entries are
// evicted least-recently-used beyond the capacity, QCONV_CACHE_CAPACITY
// (default 1024; 0 disables caching — every creation builds its own kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace qconv::impl {

struct cache_stats {
    uint64_t hits = 0;   // lookups answered by an existing (or in-flight) entry
    uint64_t misses = 0; // lookups that built the object
    size_t size = 0;
    size_t capacity = 0;
};

class kernel_cache {
public:
    using object = std::shared_ptr<const void>;

    // The process-wide cache (capacity from QCONV_CACHE_CAPACITY).
    static kernel_cache &global();

    explicit kernel_cache(size_t capacity);
    ~kernel_cache();
    kernel_cache(const kernel_cache &) = delete;
    kernel_cache &operator=(const kernel_cache &) = delete;

    // Returns the cached object for key, or builds it with make(). *hit says which.
    object get_or_create(const std::string &key, const std::function<object()> &make, bool *hit = nullptr);

    template <class T>
    std::shared_ptr<const T> get_or_create_as(const std::string &key,
                                              const std::function<std::shared_ptr<const T>()> &make,
                                              bool *hit = nullptr) {
        return std::static_pointer_cast<const T>(get_or_create(
            key, [&] { return object(make()); }, hit));
    }

    void set_capacity(size_t capacity); // evicts down to the new capacity
    void clear();                       // drops every entry and resets the counters
    cache_stats stats() const;

private:
    struct state;
    std::unique_ptr<state> s_;
};

// Capacity from QCONV_CACHE_CAPACITY (default 1024); a bad value is a qconv::error.
size_t cache_capacity_from_env();

} // namespace qconv::impl
