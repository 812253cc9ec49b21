import CCurl
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ftp's own part of a FileWire: the login is the URL's or the .netrc's for the host, else anonymous (as curl and
/// wget do). FTP says a file's size and time only when asked (SIZE, MDTM): every download asks first.
final class FTPPart: FileProtocolPart {
    private let url: URL
    private let netrcLogin: (user: String, password: String)?

    init(url: URL, netrc: (user: String, password: String)?) {
        self.url = url
        netrcLogin = netrc
    }

    var offersRanges: Bool { true }
    var knowsTheFileWhenTheBodyStarts: Bool { false }
    var peer: String? { nil }

    func configure(_ easy: UnsafeMutableRawPointer) {
        func set(_ option: Int, _ value: Int) { _ = ferry_curl_easy_setopt_long(easy, option, value) }
        func set(_ option: Int, _ value: String) { _ = ferry_curl_easy_setopt_pointer(easy, option, value) }
        set(FERRY_CURLOPT_PROTOCOLS_STR, "ftp")
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
        case FERRY_CURLE_FTP_COULDNT_RETR_FILE:
            let path = TerminalSafe.sanitize(url.path.removingPercentEncoding ?? url.path)
            return (.cannotOpenFile, .other, "\(host) would not send \(path): \(detail)")
        default:
            return nil
        }
    }
}
