// What Swift needs from ncursesw that it cannot import directly (see docs/platform.md).
#ifndef FERRY_CNCURSES_SHIM_H
#define FERRY_CNCURSES_SHIM_H

// SwiftPM drops pkg-config's -D_XOPEN_SOURCE; without this the wide-character API is not declared.
#define NCURSES_WIDECHAR 1
#include <locale.h>
#include <langinfo.h>
#include <string.h>
#include <wchar.h>
#include <ncursesw/curses.h>

// Mutable C globals are rejected by Swift 6 strict concurrency: read them through functions.
static inline WINDOW *ferry_stdscr(void) { return stdscr; }
static inline int ferry_lines(void) { return LINES; }
static inline int ferry_cols(void) { return COLS; }
static inline int ferry_colors(void) { return COLORS; }
static inline int ferry_color_pairs(void) { return COLOR_PAIRS; }

// A_* / WA_* are built by a function-like macro Swift does not import.
static inline attr_t ferry_a_normal(void) { return A_NORMAL; }
static inline attr_t ferry_a_bold(void) { return A_BOLD; }
static inline attr_t ferry_a_dim(void) { return A_DIM; }
static inline attr_t ferry_a_reverse(void) { return A_REVERSE; }
static inline attr_t ferry_a_underline(void) { return A_UNDERLINE; }

/// A terminfo string capability, or NULL when the terminal lacks it ((char *)-1 means "not a string").
static inline const char *ferry_tigetstr(const char *name) {
    char *s = tigetstr((char *)name);
    return (s == (char *)-1) ? NULL : s;
}

/// Whether the current LC_CTYPE encodes UTF-8 (call after setlocale(LC_ALL, "")).
static inline int ferry_locale_is_utf8(void) {
    const char *codeset = nl_langinfo(CODESET);
    return codeset != NULL && (strcmp(codeset, "UTF-8") == 0 || strcmp(codeset, "utf8") == 0);
}

#endif
