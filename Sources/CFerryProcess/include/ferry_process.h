#ifndef FERRY_PROCESS_H
#define FERRY_PROCESS_H

/// The malloc arenas the ferry process may use, as set before main (see ferry_process.c).
int ferry_malloc_arena_limit(void);

#endif
