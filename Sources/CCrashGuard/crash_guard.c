// Restores the terminal when ferry crashes with curses active. Only async-signal-safe calls
// (write, tcsetattr, sigaction, raise) run inside the handlers, then the handler that was there before
// (Swift's backtracer, normally).
#include "crash_guard.h"

#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const int guarded_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
#define GUARDED_COUNT (sizeof(guarded_signals) / sizeof(guarded_signals[0]))

static int saved_fd = -1;
static struct termios saved_termios;
static int have_termios = 0;
static char reset_bytes[256];
static size_t reset_length = 0;
static struct sigaction previous[GUARDED_COUNT];
static volatile sig_atomic_t installed = 0;

int ferry_crash_guard_save(int fd) {
    if (tcgetattr(fd, &saved_termios) != 0) return -1;
    saved_fd = fd;
    have_termios = 1;
    return 0;
}

void ferry_crash_guard_restore_terminal(void) {
    if (saved_fd < 0) return;
    if (reset_length > 0) {
        ssize_t ignored = write(saved_fd, reset_bytes, reset_length);
        (void)ignored;
    }
    if (have_termios) tcsetattr(saved_fd, TCSANOW, &saved_termios);
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context) {
    ferry_crash_guard_restore_terminal();
    // Chain: put the previous disposition back and run its handler here, with the original siginfo and context
    // (re-raising would hand it a signal that looks sent by kill, with the fault address lost).
    struct sigaction *prev = NULL;
    for (size_t i = 0; i < GUARDED_COUNT; i++) {
        if (guarded_signals[i] == sig) {
            prev = &previous[i];
            break;
        }
    }
    if (prev != NULL) {
        sigaction(sig, prev, NULL);
        // The signal mask the kernel would have given that handler: its sa_mask, and the signal itself
        // unblocked under SA_NODEFER (Swift's backtracer needs that: its memory reader may fault on purpose).
        sigprocmask(SIG_BLOCK, &prev->sa_mask, NULL);
        if (prev->sa_flags & SA_NODEFER) {
            sigset_t self;
            sigemptyset(&self);
            sigaddset(&self, sig);
            sigprocmask(SIG_UNBLOCK, &self, NULL);
        }
        if (prev->sa_flags & SA_SIGINFO) {
            if (prev->sa_sigaction != NULL) prev->sa_sigaction(sig, info, context);
        } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
            prev->sa_handler(sig);
        }
    }
    // A fault (si_code > 0) happens again when this returns, under whatever disposition is now in place (Swift's
    // backtracer leaves the default): the process ends. A signal sent by kill, raise or abort does not come back,
    // and a handler that returns (Swift's does) would leave ferry running on a terminal that is no longer set up
    // for it: end the process with the signal's default action (now, or on return if the signal is blocked here).
    if (info == NULL || info->si_code <= 0) {
        struct sigaction fallback;
        memset(&fallback, 0, sizeof(fallback));
        fallback.sa_handler = SIG_DFL;
        sigemptyset(&fallback.sa_mask);
        sigaction(sig, &fallback, NULL);
        raise(sig);
    }
}

void ferry_crash_guard_install(const char *reset, size_t length) {
    if (length > sizeof(reset_bytes)) length = sizeof(reset_bytes);
    if (reset != NULL && length > 0) memcpy(reset_bytes, reset, length);
    reset_length = (reset != NULL) ? length : 0;
    if (installed) return;
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_ONSTACK | SA_SIGINFO;
    for (size_t i = 0; i < GUARDED_COUNT; i++) sigaction(guarded_signals[i], &action, &previous[i]);
    installed = 1;
}

void ferry_crash_guard_uninstall(void) {
    if (!installed) return;
    for (size_t i = 0; i < GUARDED_COUNT; i++) sigaction(guarded_signals[i], &previous[i], NULL);
    installed = 0;
}
