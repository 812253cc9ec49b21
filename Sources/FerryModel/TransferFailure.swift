import Foundation

/// Why an attempt ended without success. Carries what the retry decision needs and what the user reads.
public enum TransferFailure: Error, Sendable, Equatable {
    /// The server answered with a non-success status.
    case http(status: Int, reason: String, retryAfter: TimeInterval?)
    /// The connection failed (NSURLErrorDomain code).
    case transport(code: Int, message: String)
    /// A local problem: the file system, a full disk, a bad path. Never retried.
    case local(String)
    /// The bytes did not check out (size or checksum). Never retried: the server keeps sending the same thing.
    case integrity(String)
    /// The server's answer breaks the protocol in a way a retry may fix (e.g. a wrong Content-Range).
    case protocolViolation(String)

    public var message: String {
        switch self {
        case let .http(status, reason, _): return "HTTP \(status) \(reason)"
        // The code is for the retry rules; the words name the host and the cause (TransportError).
        case let .transport(_, message): return message
        case let .local(m), let .integrity(m), let .protocolViolation(m): return m
        }
    }
}

extension TransferFailure {
    /// A failure's message (`message`, as an item's `lastError` keeps it) in a few words, for a row of a list:
    /// `HTTP 404`, `refused`, `TLS untrusted`, `disk full`. The detail view shows the message whole.
    public static func short(_ message: String) -> String {
        if message.hasPrefix("HTTP ") {
            let status = message.dropFirst(5).prefix { $0.isASCII && $0.isNumber }
            if !status.isEmpty { return "HTTP \(status)" }
        }
        if message.hasPrefix("cancelled") { return "cancelled" }
        let lower = message.lowercased()
        // Messages kept by ferry before the code left them: `... (error -1004)`.
        if let code = transportCode(message) {
            switch code {
            case -1004: return lower.contains("refused") ? "refused" : "no connection"
            case -1003: return "no such host"
            case -1001: return "timed out"
            case -1005: return "connection lost"
            case -1009: return "offline"
            case -1200: return "TLS failed"
            case -1204 ... -1201: return "TLS untrusted"
            case -1206: return "TLS client cert"
            case -1011, -1017: return "bad response"
            case -1015, -1016: return "bad encoding"
            case -1000, -1002: return "bad URL"
            case -999: return "cancelled"
            default: return "error \(code)"
            }
        }
        for (words, reason) in [("cannot connect to the proxy", "no proxy"), ("refused the tunnel", "proxy refused"),
                                ("cannot connect", lower.contains("refused") ? "refused" : "no connection"),
                                ("cannot resolve", "no such host"), ("timed out", "timed out"), ("was lost", "connection lost"),
                                ("is for another name", "TLS wrong name"), ("tls: the certificate", "TLS untrusted"), ("tls:", "TLS failed"),
                                ("is not http", "bad response"), ("cannot be decoded", "bad encoding"),
                                ("malformed url", "bad URL"), ("unsupported url", "bad URL"),
                                ("no space left", "disk full"), ("disk holding", "disk full"), ("quota", "disk full"),
                                ("permission denied", "no permission"), ("read-only", "read-only"),
                                ("sha-256 mismatch", "bad checksum"), ("no free name", "no free name"),
                                ("changed while it was being uploaded", "file changed"), ("changed since its upload began", "file changed"), ("shrank while", "file changed"),
                                ("cannot read the body", "unreadable file")]
        where lower.contains(words) {
            return reason
        }
        // Anything else: its first words.
        return message.count <= 20 ? message : String(message.prefix(19)) + "…"
    }

    /// The URLError code a transport failure's message ends with (`... (error -1004)`).
    private static func transportCode(_ message: String) -> Int? {
        guard message.hasSuffix(")"), let open = message.range(of: "(error ", options: .backwards) else { return nil }
        return Int(message[open.upperBound..<message.index(before: message.endIndex)])
    }
}
