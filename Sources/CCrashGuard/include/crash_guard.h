#ifndef FERRY_CRASH_GUARD_H
#define FERRY_CRASH_GUARD_H

#include <stddef.h>

/// Saves the termios of `fd` now, before curses changes it. Returns 0 on success.
int ferry_crash_guard_save(int fd);

/// Installs SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT handlers that write `reset` (the terminal's
/// reset strings: leave the alternate screen, show the cursor, plain attributes) to the saved fd,
/// restore the saved termios, and then hand the signal on to the handler that was there before (called
/// with the original siginfo and context). A signal sent from outside (kill, raise, abort) then ends the
/// process with its default action even when that handler returns, as Swift's backtracer does.
/// `reset` is copied (at most 255 bytes).
void ferry_crash_guard_install(const char *reset, size_t length);

/// Removes the handlers again (after a normal endwin).
void ferry_crash_guard_uninstall(void);

/// Restores the saved termios and writes the reset strings now (async-signal-safe).
void ferry_crash_guard_restore_terminal(void);

#endif
