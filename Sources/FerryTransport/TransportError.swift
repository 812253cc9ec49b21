import CCurl
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Codes of ferry's own transport that are not libcurl's.
package enum TransportCodes {
    /// A download a limit moved off an HTTP/2 stream (CurlTransfer.endedForLimit): the engine starts it again at
    /// once from where it was, spending no retry.
    package static let movedForLimit = -30_001
}

/// libcurl's result codes as the URLError codes the engine's retry rules know, the failure's kind, and a message
/// that names the host and the cause.
enum TransportError {
    /// - Parameter proxy: the proxy the request went through (its URL as configured), nil for none.
    static func describe(_ result: Int, curlMessage: String, osError: Int32, url: URL?, bodyFailure: String?,
                         idleTimeout: TimeInterval, proxy: String? = nil,
                         bodyFailureKind: FailureKind? = nil) -> (URLError.Code, FailureKind, String) {
        let host = hostDescription(url)
        let detail = curlMessage.isEmpty ? String(cString: ferry_curl_easy_strerror(Int32(result))) : curlMessage
        // The proxy, when curl's words say it was the one that failed: the tunnel, or a connect to its host and
        // port (no_proxy may have sent the request direct, to the same port).
        let proxyURL = proxy.flatMap { URL(string: $0.contains("://") ? $0 : "http://" + $0) }
        let proxyHost = proxyURL?.host
        let proxyPort = proxyURL.map { $0.port ?? ($0.scheme?.lowercased() == "https" ? 443 : 1080) }  // libcurl's defaults
        if let proxyHost, let proxyPort {
            let proxyName = "the proxy " + hostDescription(URL(string: "http://\(proxyHost.contains(":") ? "[\(proxyHost)]" : proxyHost):\(proxyPort)"))
            if detail.hasPrefix("CONNECT tunnel failed") {
                return (.cannotConnectToHost, .proxyRefused, "\(proxyName) refused the tunnel to \(host): \(detail)")
            }
            if result == FERRY_CURLE_COULDNT_CONNECT, detail.contains("\(proxyHost) port \(proxyPort)") {
                let why = osError != 0 ? " (\(String(cString: strerror(osError)).lowercased()))" : ": \(detail)"
                return (.cannotConnectToHost, .proxyUnreachable, "cannot connect to \(proxyName)\(why)")
            }
        }
        switch result {
        case FERRY_CURLE_COULDNT_RESOLVE_HOST:
            return (.cannotFindHost, .noSuchHost, "cannot resolve host name \(url?.host ?? host) (DNS): \(detail)")
        case FERRY_CURLE_COULDNT_RESOLVE_PROXY:
            return (.cannotFindHost, .proxyUnreachable, "cannot resolve the proxy's host name (DNS): \(detail)")
        case FERRY_CURLE_COULDNT_CONNECT:
            // curl's text says only "Couldn't connect to server"; the system's error says why.
            guard osError != 0 else { return (.cannotConnectToHost, .noConnection, "cannot connect to \(host): \(detail)") }
            return (.cannotConnectToHost, osError == ECONNREFUSED ? .refused : .noConnection, "cannot connect to \(host) (\(String(cString: strerror(osError)).lowercased()))")
        case FERRY_CURLE_OPERATION_TIMEDOUT:
            let seconds = Int(idleTimeout.rounded())
            let said = "timed out: nothing (or under \(CurlTransfer.stallRate) B/s) from \(host) for \(seconds) s (the idle timeout)"
            // curl's own words for the low-speed limit say the same again ("Operation too slow. Less than 10
            // bytes/sec..."); others (a connect that timed out) are kept.
            return (.timedOut, .timedOut, detail.hasPrefix("Operation too slow") ? said : "\(said): \(detail)")
        case FERRY_CURLE_PEER_FAILED_VERIFICATION where detail.contains("subject name") || detail.contains("does not match"):
            // Trusted, but made out for another name: no CA file helps (curl: "no alternative certificate
            // subject name matches target host name ...").
            return (.serverCertificateUntrusted, .tlsWrongName,
                    "TLS: the certificate of \(host) is for another name (\(detail)); the URL must name the host as its certificate does")
        case FERRY_CURLE_PEER_FAILED_VERIFICATION, FERRY_CURLE_SSL_CACERT_BADFILE, FERRY_CURLE_SSL_ISSUER_ERROR:
            return (.serverCertificateUntrusted, .tlsUntrusted,
                    "TLS: the certificate of \(host) is not trusted (\(detail)); for a private CA set SSL_CERT_FILE or [network] ca_file")
        case FERRY_CURLE_SSL_CONNECT_ERROR, FERRY_CURLE_SSL_CERTPROBLEM, FERRY_CURLE_SSL_CIPHER:
            return (.secureConnectionFailed, result == FERRY_CURLE_SSL_CERTPROBLEM ? .tlsClientCert : .tlsFailed, "TLS: the secure connection to \(host) failed: \(detail)")
        case FERRY_CURLE_PARTIAL_FILE, FERRY_CURLE_RECV_ERROR, FERRY_CURLE_SEND_ERROR, FERRY_CURLE_GOT_NOTHING,
             FERRY_CURLE_HTTP2, FERRY_CURLE_HTTP2_STREAM:
            return (.networkConnectionLost, .connectionLost, "the connection to \(host) was lost: \(detail)")
        case FERRY_CURLE_PROXY:
            return (.cannotConnectToHost, .proxyRefused, "the proxy refused the connection to \(host): \(detail)")
        case FERRY_CURLE_UNSUPPORTED_PROTOCOL:
            return (.unsupportedURL, .badURL, "unsupported URL: \(detail)")
        case FERRY_CURLE_URL_MALFORMAT:
            return (.badURL, .badURL, "malformed URL: \(detail)")
        case FERRY_CURLE_WEIRD_SERVER_REPLY:
            return (.badServerResponse, .badResponse, "\(host) sent something that is not HTTP: \(detail)")
        case FERRY_CURLE_BAD_CONTENT_ENCODING:
            return (.cannotDecodeContentData, .badEncoding, "\(host) sent a body that cannot be decoded: \(detail)")
        case FERRY_CURLE_OUT_OF_MEMORY:
            // What a response header past curl's limit (100 KiB) gives, more often than a real shortage.
            return (.badServerResponse, .badResponse, "\(host) sent a response header too large to read (over 100 KiB), or memory ran out: \(detail)")
        case FERRY_CURLE_READ_ERROR, FERRY_CURLE_ABORTED_BY_CALLBACK:
            return (.cannotOpenFile, bodyFailureKind ?? .unreadableFile, bodyFailure ?? "the body could not be read: \(detail)")
        default:
            return (.networkConnectionLost, .connectionLost, "the transfer from \(host) failed: \(detail) (curl error \(result))")
        }
    }
}
