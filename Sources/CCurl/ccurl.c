#include "ccurl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

typedef struct { int msg; void *easy; union { void *whatever; int result; } data; } curl_message;
typedef struct curl_slist_node { char *data; struct curl_slist_node *next; } curl_slist_node;

static struct {
    void *(*easy_init)(void);
    void (*easy_cleanup)(void *);
    int (*easy_setopt)(void *, long, ...);
    int (*easy_getinfo)(void *, long, ...);
    int (*easy_pause)(void *, int);
    const char *(*easy_strerror)(int);
    void *(*slist_append)(void *, const char *);
    void (*slist_free_all)(void *);
    void *(*multi_init)(void);
    int (*multi_cleanup)(void *);
    int (*multi_setopt)(void *, int, ...);
    int (*multi_add_handle)(void *, void *);
    int (*multi_remove_handle)(void *, void *);
    int (*multi_perform)(void *, int *);
    int (*multi_poll)(void *, void *, unsigned int, int, int *);
    int (*multi_wakeup)(void *);
    curl_message *(*multi_info_read)(void *, int *);
    void *(*share_init)(void);
    int (*share_setopt)(void *, int, ...);
    int (*share_cleanup)(void *);
    char *(*version)(void);
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status = -1;
static char load_error[512] = "libcurl was not loaded";

#define LOAD(field, name) \
    do { \
        *(void **)(&curl.field) = dlsym(library, name); \
        if (!curl.field) { snprintf(load_error, sizeof load_error, "libcurl.so.4 has no %s", name); return; } \
    } while (0)

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libcurl.so.4: %s", why ? why : "unknown error");
        return;
    }
    LOAD(easy_init, "curl_easy_init");
    LOAD(easy_cleanup, "curl_easy_cleanup");
    LOAD(easy_setopt, "curl_easy_setopt");
    LOAD(easy_getinfo, "curl_easy_getinfo");
    LOAD(easy_pause, "curl_easy_pause");
    LOAD(easy_strerror, "curl_easy_strerror");
    LOAD(slist_append, "curl_slist_append");
    LOAD(slist_free_all, "curl_slist_free_all");
    LOAD(multi_init, "curl_multi_init");
    LOAD(multi_cleanup, "curl_multi_cleanup");
    LOAD(multi_setopt, "curl_multi_setopt");
    LOAD(multi_add_handle, "curl_multi_add_handle");
    LOAD(multi_remove_handle, "curl_multi_remove_handle");
    LOAD(multi_perform, "curl_multi_perform");
    LOAD(multi_poll, "curl_multi_poll");
    LOAD(multi_wakeup, "curl_multi_wakeup");
    LOAD(multi_info_read, "curl_multi_info_read");
    LOAD(share_init, "curl_share_init");
    LOAD(share_setopt, "curl_share_setopt");
    LOAD(share_cleanup, "curl_share_cleanup");
    LOAD(version, "curl_version");
    load_status = 0;
}

int ferry_curl_load(void) {
    pthread_once(&load_once, load);
    return load_status;
}

const char *ferry_curl_load_error(void) { return load_status == 0 ? NULL : load_error; }
const char *ferry_curl_version(void) { return curl.version(); }

void *ferry_curl_easy_init(void) { return curl.easy_init(); }
void ferry_curl_easy_cleanup(void *easy) { curl.easy_cleanup(easy); }
int ferry_curl_easy_setopt_long(void *easy, long option, long value) { return curl.easy_setopt(easy, option, value); }
int ferry_curl_easy_setopt_pointer(void *easy, long option, const void *value) { return curl.easy_setopt(easy, option, value); }
int ferry_curl_easy_setopt_offset(void *easy, long option, int64_t value) { return curl.easy_setopt(easy, option, (long long)value); }
int ferry_curl_easy_setopt_callback(void *easy, long option, ferry_curl_data_callback callback) {
    return curl.easy_setopt(easy, option, callback);
}
int ferry_curl_easy_getinfo_long(void *easy, long info, long *value) { return curl.easy_getinfo(easy, info, value); }
int ferry_curl_easy_getinfo_offset(void *easy, long info, int64_t *value) {
    long long v = -1;
    int result = curl.easy_getinfo(easy, info, &v);
    *value = (int64_t)v;
    return result;
}

/* libcurl's struct curl_khkey: a key as base64 text (len 0) or as its blob (len bytes). */
struct curl_khkey { const char *key; size_t len; int keytype; };

/* CURLOPT_SSH_KEYFUNCTION: records what was found; a known key passes (CURLKHSTAT_FINE, 1), anything else is
   refused (CURLKHSTAT_REJECT, 2). Nothing is ever added to the file (that would be CURLKHSTAT_FINE_ADD_TO_FILE). */
static int check_host_key(void *easy, const struct curl_khkey *known, const struct curl_khkey *found, int match, void *clientp) {
    (void)easy; (void)known;
    ferry_host_key *record = clientp;
    record->match = match;
    record->type = found ? found->keytype : 0;
    record->length = 0;
    if (found && found->len > 0 && found->len <= sizeof record->blob) {
        memcpy(record->blob, found->key, found->len);
        record->length = found->len;
    }
    return match == 0 ? 1 : 2;
}

int ferry_curl_easy_check_host_key(void *easy, const char *known_hosts, ferry_host_key *record) {
    record->match = -1;
    record->length = 0;
    int result = curl.easy_setopt(easy, 10183L /* CURLOPT_SSH_KNOWNHOSTS */, known_hosts);
    if (result == 0) result = curl.easy_setopt(easy, 20184L /* CURLOPT_SSH_KEYFUNCTION */, check_host_key);
    if (result == 0) result = curl.easy_setopt(easy, 10185L /* CURLOPT_SSH_KEYDATA */, (void *)record);
    return result;
}

/* CURLOPT_SEEKFUNCTION: the body is made from the offset already. */
static int seek_done(void *clientp, long long offset, int origin) {
    (void)clientp; (void)offset; (void)origin;
    return 0; /* CURL_SEEKFUNC_OK */
}

int ferry_curl_easy_body_starts_at_offset(void *easy) {
    return curl.easy_setopt(easy, 20167L /* CURLOPT_SEEKFUNCTION */, seek_done);
}

int ferry_curl_easy_pause(void *easy, long bitmask) { return curl.easy_pause(easy, (int)bitmask); }
const char *ferry_curl_easy_strerror(int code) { return curl.easy_strerror(code); }

/* CURLOPT_SOCKOPTFUNCTION's callback: clientp carries the size. */
static int set_receive_buffer(void *clientp, int fd, int purpose) {
    (void)purpose;
    int size = (int)(intptr_t)clientp;
    if (size > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    return 0; /* CURL_SOCKOPT_OK */
}

int ferry_curl_easy_set_receive_buffer(void *easy, long bytes) {
    int result = curl.easy_setopt(easy, 20148L /* CURLOPT_SOCKOPTFUNCTION */, set_receive_buffer);
    if (result == 0) result = curl.easy_setopt(easy, 10149L /* CURLOPT_SOCKOPTDATA */, (void *)(intptr_t)bytes);
    int fd = -1;
    if (curl.easy_getinfo(easy, 0x500000L + 44 /* CURLINFO_ACTIVESOCKET */, &fd) == 0 && fd >= 0 && bytes > 0) {
        int size = (int)bytes;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    return result;
}

void *ferry_curl_slist_append(void *list, const char *string) { return curl.slist_append(list, string); }
void ferry_curl_slist_free_all(void *list) { curl.slist_free_all(list); }

void *ferry_curl_multi_init(void) { return curl.multi_init(); }
int ferry_curl_multi_cleanup(void *multi) { return curl.multi_cleanup(multi); }
int ferry_curl_multi_setopt_long(void *multi, long option, long value) { return curl.multi_setopt(multi, option, value); }
int ferry_curl_multi_add_handle(void *multi, void *easy) { return curl.multi_add_handle(multi, easy); }
int ferry_curl_multi_remove_handle(void *multi, void *easy) { return curl.multi_remove_handle(multi, easy); }
int ferry_curl_multi_perform(void *multi, int *running) { return curl.multi_perform(multi, running); }
int ferry_curl_multi_poll(void *multi, int timeout_ms, int *numfds) { return curl.multi_poll(multi, NULL, 0, timeout_ms, numfds); }
int ferry_curl_multi_poll_fds(void *multi, struct ferry_waitfd *fds, unsigned int count, int timeout_ms, int *numfds) {
    return curl.multi_poll(multi, count ? fds : NULL, count, timeout_ms, numfds);
}
int ferry_curl_multi_wakeup(void *multi) { return curl.multi_wakeup(multi); }

void *ferry_curl_connection_cache(void) {
    void *share = curl.share_init();
    if (share && curl.share_setopt(share, 1 /* CURLSHOPT_SHARE */, 5 /* CURL_LOCK_DATA_CONNECT */) != 0) {
        curl.share_cleanup(share);
        return NULL;
    }
    return share;
}

void *ferry_curl_multi_next_done(void *multi, int *result) {
    int queued = 0;
    curl_message *message;
    while ((message = curl.multi_info_read(multi, &queued)) != NULL) {
        if (message->msg == 1 /* CURLMSG_DONE */) {
            *result = message->data.result;
            return message->easy;
        }
    }
    return NULL;
}
