import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What identifies the user to hosts, beyond the item's own headers: the config's per-host headers and the
/// item's netrc file. Each reaches its own host only.
struct HostCredentials {
    var hostHeaders: [HostHeaders] = []
    var netrc: Netrc?
}

/// The headers a request carries: the user's, then the config's per-host ones for the request's host only,
/// then a netrc login for that host when nothing else authorizes the request.
enum RequestHeaders {
    /// Headers that identify the user and must not follow a redirect to another host.
    static let credentialNames: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// Every request of a transfer starts here: no cache, the user's headers, the host's, a User-Agent.
    /// Downloads ask for the file itself (corelibs turns on automatic decompression otherwise, and byte
    /// counts and ranges would no longer refer to the file).
    static func request(for spec: TransferSpec, method: String, userAgent: String, timeout: TimeInterval,
                        credentials: HostCredentials) -> URLRequest {
        var request = URLRequest(url: spec.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        apply(user: spec.headers, hostHeaders: credentials.hostHeaders, to: &request)
        // The host the user named may use the netrc's `default` entry; a host reached by a redirect may not.
        applyNetrc(credentials.netrc, orDefault: true, to: &request)
        if request.value(forHTTPHeaderField: "User-Agent") == nil { request.setValue(userAgent, forHTTPHeaderField: "User-Agent") }
        if spec.direction == .download { request.setValue("identity", forHTTPHeaderField: "Accept-Encoding") }
        if let agent = spec.sshAgent, TransferScheme(spec.url) == .sftp {
            request.setValue(agent, forHTTPHeaderField: TransferScheme.sshAgentHeader)
        }
        if spec.upload?.remoteTemp == true, TransferScheme(spec.url) == .sftp {
            request.setValue(UploadSpec.remoteTempSuffix, forHTTPHeaderField: TransferScheme.remoteTempHeader)
        }
        return request
    }

    static func apply(user: [HTTPHeader], hostHeaders: [HostHeaders], to request: inout URLRequest) {
        for header in user { request.setValue(header.value, forHTTPHeaderField: header.name) }
        applyHostHeaders(hostHeaders, to: &request)
    }

    static func applyHostHeaders(_ hostHeaders: [HostHeaders], to request: inout URLRequest) {
        guard let host = request.url?.host else { return }
        for rule in hostHeaders where rule.matches(host: host) {
            for header in rule.headers { request.setValue(header.value, forHTTPHeaderField: header.name) }
        }
    }

    /// The request for the next hop of a redirect: config headers are recomputed for the new host, and
    /// credentials are dropped when the hop leaves the previous hop's origin (another host, port or scheme:
    /// curl's rule too, so https to http on one host sends no password in clear) and then come only from the
    /// new host's own netrc entry (corelibs copies every header of the hop before).
    static func forRedirect(_ request: URLRequest, previous: URL?, credentials: HostCredentials) -> URLRequest {
        var next = request
        let hostHeaders = credentials.hostHeaders
        let configNames = Set(hostHeaders.flatMap { $0.headers.map { $0.name.lowercased() } })
        let leaves = !sameOrigin(previous, request.url)
        for name in (next.allHTTPHeaderFields ?? [:]).keys {
            let lower = name.lowercased()
            if configNames.contains(lower) || (leaves && credentialNames.contains(lower)) {
                next.setValue(nil, forHTTPHeaderField: name)
            }
        }
        applyHostHeaders(hostHeaders, to: &next)
        applyNetrc(credentials.netrc, orDefault: false, to: &next)
        return next
    }

    /// Same scheme, host and port (a missing port is the scheme's default).
    static func sameOrigin(_ a: URL?, _ b: URL?) -> Bool {
        guard let a, let b else { return false }
        func port(_ url: URL) -> Int? { url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased() && port(a) == port(b)
    }

    /// Basic credentials from the netrc for the request's host, unless the request already carries an
    /// Authorization (the user's -H, the config's) or the URL its own user (curl's order too).
    static func applyNetrc(_ netrc: Netrc?, orDefault: Bool, to request: inout URLRequest) {
        guard let netrc, let url = request.url, let host = url.host, url.user == nil,
              request.value(forHTTPHeaderField: "Authorization") == nil,
              let entry = netrc.login(for: host, orDefault: orDefault) else { return }
        let token = Data("\(entry.login):\(entry.password)".utf8).base64EncodedString()
        request.setValue("Basic \(token)", forHTTPHeaderField: "Authorization")
    }
}
