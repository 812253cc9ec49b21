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
        case let .transport(code, message): return "\(message) (error \(code))"
        case let .local(m), let .integrity(m), let .protocolViolation(m): return m
        }
    }
}
