// libcurl, reached at run time: the system's libcurl.so.4 (the one FoundationNetworking already loads) is
// opened with dlopen, so building ferry needs no libcurl development headers. The few declarations and
// constants ferry uses are restated here from curl.h of libcurl 7.88 (their values are part of libcurl's
// stable ABI). Variadic curl_easy_setopt/getinfo cannot be called from Swift: typed wrappers stand in.
#ifndef FERRY_CCURL_H
#define FERRY_CCURL_H

#include <stddef.h>
#include <stdint.h>

/// Loads libcurl once; returns 0 on success, -1 when it or a needed symbol is missing (see ferry_curl_load_error).
int ferry_curl_load(void);
const char *ferry_curl_load_error(void);
const char *ferry_curl_version(void);

typedef size_t (*ferry_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);

void *ferry_curl_easy_init(void);
void ferry_curl_easy_cleanup(void *easy);
int ferry_curl_easy_setopt_long(void *easy, long option, long value);
int ferry_curl_easy_setopt_pointer(void *easy, long option, const void *value);
int ferry_curl_easy_setopt_offset(void *easy, long option, int64_t value);
int ferry_curl_easy_setopt_callback(void *easy, long option, ferry_curl_data_callback callback);
int ferry_curl_easy_getinfo_long(void *easy, long info, long *value);
int ferry_curl_easy_getinfo_offset(void *easy, long info, int64_t *value);
int ferry_curl_easy_pause(void *easy, long bitmask);
const char *ferry_curl_easy_strerror(int code);
/// The kernel receive buffer of the transfer's sockets: set on each new socket (SO_RCVBUF, which also
/// turns off Linux's autotuning for it) and on the socket in use now, if any. 0 leaves new sockets alone.
int ferry_curl_easy_set_receive_buffer(void *easy, long bytes);

/// What an SSH server's host key was found to be against the known-hosts file (CURLOPT_SSH_KEYFUNCTION): the
/// match (0 known, 1 another key is known for the host, 2 the host is not known, -1 not checked yet), the key's
/// type (curl_khtype: 2 RSA, 3 DSS, 4 ECDSA, 5 ED25519) and its blob, for the fingerprint.
typedef struct {
    int match;
    int type;
    size_t length;
    unsigned char blob[2048];
} ferry_host_key;

/// Checks the server's host key against `known_hosts` (a file; missing: every host is unknown): a key known for
/// the host passes, any other is refused, and `record` says what was found. Never adds a key to the file.
int ferry_curl_easy_check_host_key(void *easy, const char *known_hosts, ferry_host_key *record);

/// Tells libcurl that an upload's body already starts at the resume offset (CURLOPT_SEEKFUNCTION answering
/// that the seek was made): without it libcurl reads and drops the offset's bytes from the body first.
int ferry_curl_easy_body_starts_at_offset(void *easy);

void *ferry_curl_slist_append(void *list, const char *string);
void ferry_curl_slist_free_all(void *list);

void *ferry_curl_multi_init(void);
/// A connection cache of its own (a share object holding connections, CURLOPT_SHARE): NULL on failure.
/// Its handles' connections are not the multi's, so no other handle takes one of them, nor they another's.
void *ferry_curl_connection_cache(void);
int ferry_curl_multi_cleanup(void *multi);
int ferry_curl_multi_setopt_long(void *multi, long option, long value);
int ferry_curl_multi_add_handle(void *multi, void *easy);
int ferry_curl_multi_remove_handle(void *multi, void *easy);
int ferry_curl_multi_perform(void *multi, int *running);
int ferry_curl_multi_poll(void *multi, int timeout_ms, int *numfds);
/* libcurl's struct curl_waitfd: a descriptor of our own to wait on beside libcurl's (an sftp connection's). */
struct ferry_waitfd { int fd; short events; short revents; };
int ferry_curl_multi_poll_fds(void *multi, struct ferry_waitfd *fds, unsigned int count, int timeout_ms, int *numfds);
int ferry_curl_multi_wakeup(void *multi);
/// The next finished transfer: its easy handle (NULL when there is none) and its CURLcode.
void *ferry_curl_multi_next_done(void *multi, int *result);

enum {
    FERRY_CURLOPT_WRITEDATA = 10001,
    FERRY_CURLOPT_URL = 10002,
    FERRY_CURLOPT_PROXY = 10004,
    FERRY_CURLOPT_READDATA = 10009,
    FERRY_CURLOPT_ERRORBUFFER = 10010,
    FERRY_CURLOPT_WRITEFUNCTION = 20011,
    FERRY_CURLOPT_READFUNCTION = 20012,
    FERRY_CURLOPT_LOW_SPEED_LIMIT = 19,
    FERRY_CURLOPT_LOW_SPEED_TIME = 20,
    FERRY_CURLOPT_HTTPHEADER = 10023,
    FERRY_CURLOPT_HEADERDATA = 10029,
    FERRY_CURLOPT_CUSTOMREQUEST = 10036,
    FERRY_CURLOPT_NOBODY = 44,
    FERRY_CURLOPT_UPLOAD = 46,
    FERRY_CURLOPT_POST = 47,
    FERRY_CURLOPT_FOLLOWLOCATION = 52,
    FERRY_CURLOPT_HTTPGET = 80,
    FERRY_CURLOPT_CAINFO = 10065,
    FERRY_CURLOPT_CAPATH = 10097,
    FERRY_CURLOPT_HEADERFUNCTION = 20079,
    FERRY_CURLOPT_CONNECTTIMEOUT = 78,
    FERRY_CURLOPT_NOSIGNAL = 99,
    FERRY_CURLOPT_BUFFERSIZE = 98,
    FERRY_CURLOPT_NOPROXY = 10177,
    FERRY_CURLOPT_INFILESIZE_LARGE = 30115,
    FERRY_CURLOPT_POSTFIELDSIZE_LARGE = 30120,
    FERRY_CURLOPT_UPLOAD_BUFFERSIZE = 280,
    FERRY_CURLOPT_TCP_KEEPALIVE = 213,
    FERRY_CURLOPT_PROTOCOLS_STR = 10318,
    FERRY_CURLOPT_HTTP_VERSION = 84,
    FERRY_CURLOPT_SUPPRESS_CONNECT_HEADERS = 265,
    FERRY_CURLOPT_HTTP_CONTENT_DECODING = 158,
    FERRY_CURLOPT_PROXY_CAINFO = 10246,

    FERRY_CURLOPT_RANGE = 10007,
    FERRY_CURLOPT_USERNAME = 10173,
    FERRY_CURLOPT_PASSWORD = 10174,
    FERRY_CURLOPT_KEYPASSWD = 10026,
    FERRY_CURLOPT_FILETIME = 69,
    FERRY_CURLOPT_QUOTE = 10028,
    FERRY_CURLOPT_FTP_CREATE_MISSING_DIRS = 110,
    /// TLS on an ftp connection (CURLOPT_USE_SSL); CURLUSESSL_ALL: required for the control and data connections.
    FERRY_CURLOPT_USE_SSL = 119,
    FERRY_CURLUSESSL_ALL = 3,
    /// The TLS versions allowed (CURLOPT_SSLVERSION); CURL_SSLVERSION_MAX_TLSv1_2: none past 1.2.
    FERRY_CURLOPT_SSLVERSION = 32,
    FERRY_CURL_SSLVERSION_MAX_TLSv1_2 = 393216,
    FERRY_CURLOPT_RESUME_FROM_LARGE = 30116,
    FERRY_CURLOPT_APPEND = 50,
    FERRY_CURLOPT_SSH_AUTH_TYPES = 151,
    FERRY_CURLOPT_SSH_PUBLIC_KEYFILE = 10152,
    FERRY_CURLOPT_SSH_PRIVATE_KEYFILE = 10153,
    FERRY_CURLSSH_AUTH_PUBLICKEY = 1,
    FERRY_CURLSSH_AUTH_PASSWORD = 2,
    FERRY_CURLSSH_AUTH_KEYBOARD = 8,
    FERRY_CURLSSH_AUTH_AGENT = 16,

    FERRY_CURLINFO_RESPONSE_CODE = 0x200000 + 2,
    FERRY_CURLINFO_OS_ERRNO = 0x200000 + 25,
    /// New connections the transfer made (0: it went out on a cached one).
    FERRY_CURLINFO_NUM_CONNECTS = 0x200000 + 26,

    /// The remote file's modification time, seconds since 1970 (-1 unknown; CURLINFO_FILETIME_T).
    FERRY_CURLINFO_FILETIME_T = 0x600000 + 14,
    /// The body's length as the server told it (-1 unknown; CURLINFO_CONTENT_LENGTH_DOWNLOAD_T).
    FERRY_CURLINFO_CONTENT_LENGTH_DOWNLOAD_T = 0x600000 + 15,

    FERRY_CURLPAUSE_CONT = 0,
    FERRY_CURLPAUSE_RECV = 1,
    FERRY_CURLPAUSE_SEND = 4,
    FERRY_CURL_HTTP_VERSION_1_1 = 2,
    /// HTTP/2 when TLS's ALPN agrees, HTTP/1.1 otherwise (and for http://: no h2c guessing).
    FERRY_CURL_HTTP_VERSION_2TLS = 4,
    /// Wait for a connection that may multiplex rather than open another (CURLOPT_PIPEWAIT).
    FERRY_CURLOPT_PIPEWAIT = 237,
    /// A new connection, not one from the cache (CURLOPT_FRESH_CONNECT).
    FERRY_CURLOPT_FRESH_CONNECT = 74,
    /// The share object whose connection cache the handle uses (CURLOPT_SHARE).
    FERRY_CURLOPT_SHARE = 10100,
    FERRY_CURLMOPT_PIPELINING = 3,
    FERRY_CURLPIPE_MULTIPLEX = 2,
    FERRY_CURLMOPT_MAX_CONCURRENT_STREAMS = 16,

    FERRY_CURLE_OK = 0,
    FERRY_CURLE_UNSUPPORTED_PROTOCOL = 1,
    FERRY_CURLE_URL_MALFORMAT = 3,
    FERRY_CURLE_COULDNT_RESOLVE_PROXY = 5,
    FERRY_CURLE_COULDNT_RESOLVE_HOST = 6,
    FERRY_CURLE_COULDNT_CONNECT = 7,
    FERRY_CURLE_WEIRD_SERVER_REPLY = 8,
    FERRY_CURLE_REMOTE_ACCESS_DENIED = 9,
    FERRY_CURLE_FTP_COULDNT_RETR_FILE = 19,
    FERRY_CURLE_UPLOAD_FAILED = 25,
    FERRY_CURLE_RANGE_ERROR = 33,
    FERRY_CURLE_LOGIN_DENIED = 67,
    FERRY_CURLE_REMOTE_DISK_FULL = 70,
    FERRY_CURLE_REMOTE_FILE_EXISTS = 73,
    FERRY_CURLE_REMOTE_FILE_NOT_FOUND = 78,
    FERRY_CURLE_QUOTE_ERROR = 21,
    FERRY_CURLE_SSH = 79,
    FERRY_CURLE_HTTP2 = 16,
    FERRY_CURLE_PARTIAL_FILE = 18,
    FERRY_CURLE_WRITE_ERROR = 23,
    FERRY_CURLE_OUT_OF_MEMORY = 27,
    FERRY_CURLE_READ_ERROR = 26,
    FERRY_CURLE_OPERATION_TIMEDOUT = 28,
    FERRY_CURLE_SSL_CONNECT_ERROR = 35,
    FERRY_CURLE_ABORTED_BY_CALLBACK = 42,
    FERRY_CURLE_GOT_NOTHING = 52,
    FERRY_CURLE_SEND_ERROR = 55,
    FERRY_CURLE_RECV_ERROR = 56,
    FERRY_CURLE_SSL_CERTPROBLEM = 58,
    /// An ftp server that would not take TLS where it was required (CURLE_USE_SSL_FAILED).
    FERRY_CURLE_USE_SSL_FAILED = 64,
    FERRY_CURLE_SSL_CIPHER = 59,
    FERRY_CURLE_PEER_FAILED_VERIFICATION = 60,
    FERRY_CURLE_BAD_CONTENT_ENCODING = 61,
    FERRY_CURLE_SSL_CACERT_BADFILE = 77,
    FERRY_CURLE_SSL_ISSUER_ERROR = 83,
    FERRY_CURLE_HTTP2_STREAM = 92,
    FERRY_CURLE_PROXY = 97,

    FERRY_CURL_ERROR_SIZE = 256,
};

/// What a write or read callback returns to pause its transfer (CURL_WRITEFUNC_PAUSE, CURL_READFUNC_PAUSE).
static const size_t FERRY_CURL_FUNC_PAUSE = 0x10000001;
/// What a read callback returns to abort the transfer (CURL_READFUNC_ABORT).
static const size_t FERRY_CURL_READFUNC_ABORT = 0x10000000;

#endif
