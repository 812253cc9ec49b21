import Foundation

/// Why an attempt ended without success. Carries what the retry decision needs, the failure's kind (set here,
/// where the failure is made) and what the user reads.
public enum TransferFailure: Error, Sendable, Equatable {
    /// The server answered with a non-success status.
    case http(status: Int, reason: String, retryAfter: TimeInterval?)
    /// The connection failed (NSURLErrorDomain code, for the retry rules), of the kind the transport said.
    case transport(code: Int, kind: FailureKind, message: String)
    /// A local problem: the file system, a full disk, a bad path. Never retried.
    case local(FailureKind, String)
    /// The bytes did not check out (a checksum, a file that changed). Never retried: the server keeps sending the
    /// same thing.
    case integrity(FailureKind, String)
    /// The server's answer breaks the protocol in a way a retry may fix (e.g. a wrong Content-Range).
    case protocolViolation(String)

    public var message: String {
        switch self {
        case let .http(status, reason, _): return "HTTP \(status) \(reason)"
        // The code is for the retry rules; the words name the host and the cause (TransportError).
        case let .transport(_, _, message): return message
        case let .local(_, m), let .integrity(_, m), let .protocolViolation(m): return m
        }
    }

    /// What the failure is, for every surface but the message.
    public var cause: FailureCause {
        switch self {
        case let .http(status, _, _): return FailureCause(.http, status: status)
        case let .transport(_, kind, _), let .local(kind, _), let .integrity(kind, _): return FailureCause(kind)
        case .protocolViolation: return FailureCause(.protocol)
        }
    }

    /// A local file operation that failed with `errno`: its kind from the error, the words `what: strerror`.
    public static func local(_ what: String, errno code: Int32) -> TransferFailure {
        .local(FailureKind(errno: code), "\(what): \(String(cString: strerror(code)))")
    }
}

extension FailureCause {
    /// The cause of a failure kept by a ferry from before kinds were stored (its message only): read from the
    /// message's words, for those rows alone. Everything since carries its kind.
    public init(legacyMessage message: String) {
        if message.hasPrefix("HTTP ") {
            let status = message.dropFirst(5).prefix { $0.isASCII && $0.isNumber }
            if let code = Int(status) {
                self.init(.http, status: code)
                return
            }
        }
        if message.hasPrefix("cancelled") {
            self.init(.cancelled)
            return
        }
        let lower = message.lowercased()
        // Messages kept before the code left them: `... (error -1004)`.
        if let code = Self.transportCode(message) {
            let kind = FailureKind(urlErrorCode: code)
            self.init(kind == .noConnection && lower.contains("refused") ? .refused : kind)
            return
        }
        let phrases: [(String, FailureKind)] = [
            ("cannot connect to the proxy", .proxyUnreachable), ("refused the tunnel", .proxyRefused),
            ("cannot connect", lower.contains("refused") ? .refused : .noConnection),
            ("cannot resolve", .noSuchHost), ("timed out", .timedOut), ("was lost", .connectionLost),
            ("is for another name", .tlsWrongName), ("tls: the certificate", .tlsUntrusted), ("tls:", .tlsFailed),
            ("is not http", .badResponse), ("cannot be decoded", .badEncoding),
            ("malformed url", .badURL), ("unsupported url", .badURL),
            ("no space left", .diskFull), ("disk holding", .diskFull), ("quota", .diskFull),
            ("permission denied", .noPermission), ("read-only", .readOnly),
            ("sha-256 mismatch", .checksum), ("no free name", .noFreeName),
            ("changed while it was being uploaded", .fileChanged), ("changed since its upload began", .fileChanged),
            ("shrank while", .fileChanged), ("cannot read the body", .unreadableFile),
        ]
        self.init(phrases.first { lower.contains($0.0) }?.1 ?? .other)
    }

    /// The URLError code a transport failure's message ends with (`... (error -1004)`).
    private static func transportCode(_ message: String) -> Int? {
        guard message.hasSuffix(")"), let open = message.range(of: "(error ", options: .backwards) else { return nil }
        return Int(message[open.upperBound..<message.index(before: message.endIndex)])
    }
}
