// The kernel cache (see cache.h): a map of shared futures plus an LRU list.
#include "dispatch/cache.h"

#include <cerrno>
#include <cstdlib>
#include <future>
#include <list>
#include <mutex>
#include <unordered_map>

#include "qconv/types.h"

namespace qconv::impl {

struct kernel_cache::state {
    struct slot {
        std::shared_future<object> value;
        std::list<std::string>::iterator lru; // position in `order`
        uint64_t serial = 0;                  // tells a re-created slot from the old one
    };
    mutable std::mutex mu;
    size_t capacity = 0;
    std::unordered_map<std::string, slot> slots;
    std::list<std::string> order; // most recently used first
    uint64_t next_serial = 0;
    uint64_t hits = 0, misses = 0;

    void evict_to(size_t n) {
        while (slots.size() > n) {
            slots.erase(order.back());
            order.pop_back();
        }
    }
    void erase_if_serial(const std::string &key, uint64_t serial) {
        auto it = slots.find(key);
        if (it == slots.end() || it->second.serial != serial) return;
        order.erase(it->second.lru);
        slots.erase(it);
    }
};

kernel_cache::kernel_cache(size_t capacity) : s_(std::make_unique<state>()) { s_->capacity = capacity; }
kernel_cache::~kernel_cache() = default;

kernel_cache &kernel_cache::global() {
    static kernel_cache cache(cache_capacity_from_env());
    return cache;
}

kernel_cache::object kernel_cache::get_or_create(const std::string &key, const std::function<object()> &make,
                                                 bool *hit) {
    std::unique_lock<std::mutex> lock(s_->mu);
    if (s_->capacity == 0) {
        ++s_->misses;
        lock.unlock();
        if (hit) *hit = false;
        return make();
    }
    auto found = s_->slots.find(key);
    if (found != s_->slots.end()) {
        ++s_->hits;
        s_->order.splice(s_->order.begin(), s_->order, found->second.lru);
        std::shared_future<object> value = found->second.value;
        lock.unlock();
        if (hit) *hit = true;
        return value.get(); // waits while another thread builds it
    }
    ++s_->misses;
    std::promise<object> promise;
    s_->order.push_front(key);
    const uint64_t serial = ++s_->next_serial;
    s_->slots.emplace(key, state::slot{promise.get_future().share(), s_->order.begin(), serial});
    s_->evict_to(s_->capacity);
    lock.unlock();
    if (hit) *hit = false;
    try {
        object value = make();
        promise.set_value(value);
        return value;
    } catch (...) {
        promise.set_exception(std::current_exception());
        std::lock_guard<std::mutex> relock(s_->mu);
        s_->erase_if_serial(key, serial);
        throw;
    }
}

void kernel_cache::set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->capacity = capacity;
    s_->evict_to(capacity);
}

void kernel_cache::clear() {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->slots.clear();
    s_->order.clear();
    s_->hits = s_->misses = 0;
}

cache_stats kernel_cache::stats() const {
    std::lock_guard<std::mutex> lock(s_->mu);
    cache_stats st;
    st.hits = s_->hits;
    st.misses = s_->misses;
    st.size = s_->slots.size();
    st.capacity = s_->capacity;
    return st;
}

size_t cache_capacity_from_env() {
    const char *v = std::getenv("QCONV_CACHE_CAPACITY");
    if (!v || !*v) return 1024;
    char *end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 10);
    if (*end != '\0' || n < 0 || errno != 0)
        fail("QCONV_CACHE_CAPACITY", std::string("expected a non-negative integer (got '") + v + "')");
    return static_cast<size_t>(n);
}

} // namespace qconv::impl
