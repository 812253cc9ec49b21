import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The headers a request carries: the user's, then the config's per-host ones for the request's host only.
enum RequestHeaders {
    /// Headers that identify the user and must not follow a redirect to another host.
    static let credentials: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// Every request of a transfer starts here: no cache, the user's headers, the host's, a User-Agent.
    /// Downloads ask for the file itself (corelibs turns on automatic decompression otherwise, and byte
    /// counts and ranges would no longer refer to the file).
    static func request(for spec: TransferSpec, method: String, userAgent: String, timeout: TimeInterval,
                        hostHeaders: [HostHeaders]) -> URLRequest {
        var request = URLRequest(url: spec.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        apply(user: spec.headers, hostHeaders: hostHeaders, to: &request)
        if request.value(forHTTPHeaderField: "User-Agent") == nil { request.setValue(userAgent, forHTTPHeaderField: "User-Agent") }
        if spec.direction == .download { request.setValue("identity", forHTTPHeaderField: "Accept-Encoding") }
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
    /// credentials are dropped when the host changes (corelibs copies every header of the first request).
    static func forRedirect(_ request: URLRequest, from original: URL?, hostHeaders: [HostHeaders]) -> URLRequest {
        var next = request
        let configNames = Set(hostHeaders.flatMap { $0.headers.map { $0.name.lowercased() } })
        let changedHost = original?.host?.lowercased() != request.url?.host?.lowercased()
        for name in (next.allHTTPHeaderFields ?? [:]).keys {
            let lower = name.lowercased()
            if configNames.contains(lower) || (changedHost && credentials.contains(lower)) {
                next.setValue(nil, forHTTPHeaderField: name)
            }
        }
        applyHostHeaders(hostHeaders, to: &next)
        return next
    }
}
