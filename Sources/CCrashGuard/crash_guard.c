// Restores the terminal when ferry crashes with curses active. Only async-signal-safe calls
// (write, tcsetattr, sigaction, raise) run inside the handlers.
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

static void on_fatal_signal(int sig) {
    ferry_crash_guard_restore_terminal();
    // Chain: put the previous disposition back and re-raise; the signal is delivered on return.
    for (size_t i = 0; i < GUARDED_COUNT; i++) {
        if (guarded_signals[i] == sig) {
            sigaction(sig, &previous[i], NULL);
            break;
        }
    }
    raise(sig);
}

void ferry_crash_guard_install(const char *reset, size_t length) {
    if (length > sizeof(reset_bytes)) length = sizeof(reset_bytes);
    if (reset != NULL && length > 0) memcpy(reset_bytes, reset, length);
    reset_length = (reset != NULL) ? length : 0;
    if (installed) return;
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_ONSTACK;
    for (size_t i = 0; i < GUARDED_COUNT; i++) sigaction(guarded_signals[i], &action, &previous[i]);
    installed = 1;
}

void ferry_crash_guard_uninstall(void) {
    if (!installed) return;
    for (size_t i = 0; i < GUARDED_COUNT; i++) sigaction(guarded_signals[i], &previous[i], NULL);
    installed = 0;
}
