// A process-wide counting allocator hook for strata_alloc_tests. While armed, every
// malloc-family call and every operator new/delete in any thread (the caller's and the
// session's pool threads alike) is counted; the memory itself comes from glibc.
#pragma once

#include <cstddef>

namespace alloc_hook {

void Arm();            // resets the counters and starts counting
void Disarm();         // stops counting
size_t Allocations();  // malloc/calloc/realloc/memalign/operator new calls while armed
size_t Frees();        // free/operator delete calls (of non-null pointers) while armed

}  // namespace alloc_hook
