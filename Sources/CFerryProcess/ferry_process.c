// Settings of the ferry process that must be made before its first thread exists: only the ferry executable
// links this target (never the tests).
#include "ferry_process.h"

#include <malloc.h>

static const int arena_limit = 1;

// One malloc arena for every thread. glibc gives each new thread an arena of its own (up to 8 per core), and
// memory a thread frees stays in its arena: 1,000 x 64 KiB as 64 HTTP/2 streams peaked at 60-76 MiB RSS with
// 13 MiB of heap in use at the peak, 27 MiB of it anonymous arena pages. With one arena: 56-57 MiB, no slower
// (docs/performance.md). glibc fixes the limit when the second arena is made, so this runs before main.
__attribute__((constructor)) static void ferry_limit_arenas(void) {
    mallopt(M_ARENA_MAX, arena_limit);
}

int ferry_malloc_arena_limit(void) { return arena_limit; }
