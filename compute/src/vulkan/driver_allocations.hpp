// DriverAllocations: a scope around calls into the Vulkan loader and driver (instance, device and pipeline
// creation and destruction) in which LeakSanitizer does not track what is allocated. The loader and Mesa's
// drivers keep some allocations until the process ends, some inside modules already unloaded by then, which
// LeakSanitizer can neither name nor be told to ignore; without this every sanitizer-built program that opens a
// device would fail its leak check. Our own allocations outside these calls stay checked. A no-op elsewhere.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define LOOM_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define LOOM_LEAK_CHECKED 1
#endif
#endif

#ifdef LOOM_LEAK_CHECKED
#include <sanitizer/lsan_interface.h>
#endif

namespace loom::compute::vulkan::detail {

class DriverAllocations {
 public:
#ifdef LOOM_LEAK_CHECKED
  DriverAllocations() { __lsan_disable(); }
  ~DriverAllocations() { __lsan_enable(); }
#else
  // User-provided (not defaulted), so that a scope object is not an "unused variable" where it does nothing.
  DriverAllocations() {}
  ~DriverAllocations() {}
#endif
  DriverAllocations(const DriverAllocations&) = delete;
  DriverAllocations& operator=(const DriverAllocations&) = delete;
};

}  // namespace loom::compute::vulkan::detail
