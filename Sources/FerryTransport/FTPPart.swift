import CCurl
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ftp's own part of a FileWire: the login is the URL's or the .netrc's for the host, else anonymous (as curl and
/// wget do). FTP says a file's size and time only when asked (SIZE, MDTM): every download asks first. Over
/// `ftps://` TLS is required on the ftp port (AUTH TLS) for the login and every byte, the certificate checked as
/// https's is (the same CA settings); libcurl's own `ftps://` is the older implicit TLS on port 990.
final class FTPPart: FileProtocolPart {
    private let url: URL
    private let netrcLogin: (user: String, password: String)?
    private let tls: Bool
    /// The certificates trusted, as for https (SSL_CERT_FILE, SSL_CERT_DIR, `[network] ca_file`).
    private let caFile: String?
    private let caDirectory: String?

    init(url: URL, netrc: (user: String, password: String)?, settings: TransportSettings) {
        self.url = url
        netrcLogin = netrc
        tls = TransferScheme(url) == .ftps
        caFile = settings.caFile
        caDirectory = settings.caDirectory
    }

    /// libcurl before 8.9 closes an ftps data connection with the server's TLS 1.3 session ticket unread: the kernel
    /// resets it, and the server loses what it had not read yet of an upload it then says is complete (curl/curl#6149,
    /// fixed by curl/curl#13904; a full test run in about 50 saw pyftpdlib keep 112 KiB of 3 MiB). On those versions
    /// ftps stays at TLS 1.2, which has no ticket after the handshake.
    static func tlsCeiling(libcurl version: String?) -> Int? {
        let number = version?.split(separator: " ").first(where: { $0.hasPrefix("libcurl/") })?.dropFirst("libcurl/".count)
        let parts = number.map { $0.split(separator: ".").prefix(2).compactMap { Int($0) } } ?? []
        guard parts.count == 2 else { return FERRY_CURL_SSLVERSION_MAX_TLSv1_2 }
        return (parts[0], parts[1]) < (8, 9) ? FERRY_CURL_SSLVERSION_MAX_TLSv1_2 : nil
    }

    /// The ceiling for the libcurl this process loaded (it is loaded before any transfer is configured).
    private static let loadedCeiling = tlsCeiling(libcurl: ferry_curl_load() == 0 ? ferry_curl_version().map { String(cString: $0) } : nil)

    var offersRanges: Bool { true }
    var knowsTheFileWhenTheBodyStarts: Bool { false }
    var checksUploadedSize: Bool { true }
    var peer: String? { nil }

    func configure(_ easy: UnsafeMutableRawPointer) {
        func set(_ option: Int, _ value: Int) { _ = ferry_curl_easy_setopt_long(easy, option, value) }
        func set(_ option: Int, _ value: String) { _ = ferry_curl_easy_setopt_pointer(easy, option, value) }
        set(FERRY_CURLOPT_PROTOCOLS_STR, "ftp")
        if tls {
            // Asked as ftp:// with TLS required (explicit TLS): nothing goes in the clear, a server without TLS is refused.
            if var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) {
                parts.scheme = "ftp"
                if let plain = parts.url?.absoluteString { set(FERRY_CURLOPT_URL, plain) }
            }
            set(FERRY_CURLOPT_USE_SSL, FERRY_CURLUSESSL_ALL)
            if let ceiling = Self.loadedCeiling { set(FERRY_CURLOPT_SSLVERSION, ceiling) }
            if let caFile { set(FERRY_CURLOPT_CAINFO, caFile) }
            if let caDirectory { set(FERRY_CURLOPT_CAPATH, caDirectory) }
        }
        // Reached directly (libcurl would take ftp_proxy or an http proxy from the environment).
        set(FERRY_CURLOPT_PROXY, "")
        if url.user == nil, let netrcLogin {
            set(FERRY_CURLOPT_USERNAME, netrcLogin.user)
            set(FERRY_CURLOPT_PASSWORD, netrcLogin.password)
        }
    }

    private var host: String { hostDescription(url) }
    private var login: String { url.user ?? netrcLogin?.user ?? "anonymous" }

    func describe(_ result: Int, detail: String, ask: FileWire.Ask) -> (URLError.Code, FailureKind, String)? {
        switch result {
        case FERRY_CURLE_LOGIN_DENIED:
            let tried = url.password != nil ? "the URL's password" : netrcLogin != nil ? "the .netrc password" : "no password"
            return (.userAuthenticationRequired, .loginRefused, "\(host) refused the login of \(login) (tried: \(tried)): \(detail)")
        case FERRY_CURLE_USE_SSL_FAILED:
            return (.secureConnectionFailed, .tlsFailed,
                    "\(host) does not take TLS (AUTH TLS): over ftps:// nothing is sent in the clear, not even the login; "
                        + "ftp:// sends it all unencrypted")
        case FERRY_CURLE_FTP_COULDNT_RETR_FILE:
            let path = TerminalSafe.sanitize(url.path.removingPercentEncoding ?? url.path)
            return (.cannotOpenFile, .other, "\(host) would not send \(path): \(detail)")
        default:
            return nil
        }
    }
}
