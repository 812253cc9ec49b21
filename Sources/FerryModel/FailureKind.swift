import Foundation

/// Why an item failed, as a value: set where the failure is made (the transport, the file system, a protocol's
/// rules) and carried beside the message, which is for people. Rows, aria2's `errorCode`, `list --json` and the
/// hooks' `FERRY_ERROR_KIND` read the kind, never the message's words. New protocols add their kinds here.
public enum FailureKind: String, Sendable, Codable, CaseIterable {
    /// The server (its port) refused the connection.
    case refused
    /// No connection could be made for another reason (no route, unreachable network).
    case noConnection = "no-connection"
    /// The host name did not resolve.
    case noSuchHost = "no-such-host"
    case timedOut = "timed-out"
    case connectionLost = "connection-lost"
    case offline
    case tlsFailed = "tls-failed"
    /// The server's certificate is not trusted (unknown CA, expired, self-signed).
    case tlsUntrusted = "tls-untrusted"
    /// A trusted certificate made out for another name.
    case tlsWrongName = "tls-wrong-name"
    case tlsClientCert = "tls-client-cert"
    /// The proxy could not be reached.
    case proxyUnreachable = "proxy-unreachable"
    /// The proxy refused the request or the tunnel.
    case proxyRefused = "proxy-refused"
    /// The server answered with a status that is not success (FailureCause.status says which).
    case http
    /// The answer is not what the protocol allows (not HTTP, a header too large).
    case badResponse = "bad-response"
    case badEncoding = "bad-encoding"
    case badURL = "bad-url"
    case diskFull = "disk-full"
    case noPermission = "no-permission"
    case readOnly = "read-only"
    /// The bytes did not check out against the checksum asked for.
    case checksum
    /// An upload's file changed while it was sent.
    case fileChanged = "file-changed"
    /// Every name for the file in its directory is taken.
    case noFreeName = "no-free-name"
    /// An upload's file (or standard input) could not be read.
    case unreadableFile = "unreadable-file"
    /// The server broke the protocol's rules (a wrong Content-Range, a short body, an upload it lost).
    case `protocol`
    case cancelled
    /// An SSH server's host key is not in the known-hosts file (the message shows its fingerprint).
    case hostKeyUnknown = "host-key-unknown"
    /// An SSH server's host key is not the one the known-hosts file has for it: refused, always.
    case hostKeyChanged = "host-key-changed"
    /// The server refused the login (every method tried failed).
    case loginRefused = "login-refused"
    /// The remote file (or its directory) does not exist (sftp, scp; HTTP says 404, an `http` failure).
    case noSuchFile = "no-such-file"
    /// The URL names a directory where a file was asked for (sftp, scp).
    case isDirectory = "is-a-directory"
    case other

    /// The key a transport puts the kind under in an NSError's userInfo (its raw value), so that it reaches the
    /// engine through URLSession with the error.
    public static let userInfoKey = "ferry.failureKind"

    /// The kind a URLError code stands for, where nothing said more (corelibs' own errors: a bad URL, an
    /// unsupported scheme).
    public init(urlErrorCode code: Int) {
        switch code {
        case -1004: self = .noConnection
        case -1003, -1006: self = .noSuchHost
        case -1001: self = .timedOut
        case -1005, -1: self = .connectionLost
        case -1009: self = .offline
        case -1200: self = .tlsFailed
        case -1204 ... -1201: self = .tlsUntrusted
        case -1206: self = .tlsClientCert
        case -1011, -1017: self = .badResponse
        case -1015, -1016: self = .badEncoding
        case -1000, -1002: self = .badURL
        case -999: self = .cancelled
        default: self = .other
        }
    }

    /// The kind of a local file error (errno): a full disk or quota, no permission, a read-only file system.
    public init(errno code: Int32) {
        switch code {
        case ENOSPC, EDQUOT: self = .diskFull
        case EACCES, EPERM: self = .noPermission
        case EROFS: self = .readOnly
        default: self = .other
        }
    }
}

/// A failure's kind and, for `http`, its status: what every surface but the message reads.
public struct FailureCause: Sendable, Hashable {
    public var kind: FailureKind
    /// The HTTP status of an `http` failure.
    public var status: Int?

    public init(_ kind: FailureKind, status: Int? = nil) {
        self.kind = kind
        self.status = kind == .http ? status : nil
    }

    /// A row's few words: `HTTP 404`, `refused`, `TLS untrusted`, `disk full`. `message` (outside text, made safe
    /// by the caller) gives the words of `other` only: its first ones.
    public func words(message: String?) -> String {
        switch kind {
        case .refused: return "refused"
        case .noConnection: return "no connection"
        case .noSuchHost: return "no such host"
        case .timedOut: return "timed out"
        case .connectionLost: return "connection lost"
        case .offline: return "offline"
        case .tlsFailed: return "TLS failed"
        case .tlsUntrusted: return "TLS untrusted"
        case .tlsWrongName: return "TLS wrong name"
        case .tlsClientCert: return "TLS client cert"
        case .proxyUnreachable: return "no proxy"
        case .proxyRefused: return "proxy refused"
        case .http: return status.map { "HTTP \($0)" } ?? "HTTP error"
        case .badResponse: return "bad response"
        case .badEncoding: return "bad encoding"
        case .badURL: return "bad URL"
        case .diskFull: return "disk full"
        case .noPermission: return "no permission"
        case .readOnly: return "read-only"
        case .checksum: return "bad checksum"
        case .fileChanged: return "file changed"
        case .noFreeName: return "no free name"
        case .unreadableFile: return "unreadable file"
        case .protocol: return "protocol error"
        case .cancelled: return "cancelled"
        case .hostKeyUnknown: return "host key unknown"
        case .hostKeyChanged: return "HOST KEY CHANGED"
        case .loginRefused: return "login refused"
        case .noSuchFile: return "no such file"
        case .isDirectory: return "a directory"
        case .other:
            guard let message, !message.isEmpty else { return "failed" }
            return message.count <= 20 ? message : String(message.prefix(19)) + "…"
        }
    }

    /// How the store and the wire keep it: the kind's raw value, `http:404` for a status.
    public var token: String {
        status.map { "\(kind.rawValue):\($0)" } ?? kind.rawValue
    }

    /// From `token`; nil for one this version does not know.
    public init?(token: String) {
        let parts = token.split(separator: ":", maxSplits: 1)
        guard let first = parts.first, let kind = FailureKind(rawValue: String(first)) else { return nil }
        self.init(kind, status: parts.count > 1 ? Int(parts[1]) : nil)
    }
}

extension FailureCause: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let token = try container.decode(String.self)
        self = FailureCause(token: token) ?? FailureCause(.other)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(token)
    }
}

/// An item's last failure as the engine keeps it: what it is, and the message a person reads.
public struct ItemFailure: Sendable, Equatable {
    public var cause: FailureCause
    public var message: String

    public init(_ cause: FailureCause, _ message: String) {
        self.cause = cause
        self.message = message
    }

    public init(_ failure: TransferFailure) {
        self.init(failure.cause, failure.message)
    }

    /// As a store or a snapshot keeps it: the message, and the cause when it was stored (rows from before kinds
    /// were stored have the message only, and are read from its words).
    public init?(message: String?, cause: FailureCause?) {
        guard let message else { return nil }
        self.init(cause ?? FailureCause(legacyMessage: message), message)
    }

    /// A cancel by the user.
    public static func cancelled(_ message: String = "cancelled") -> ItemFailure { ItemFailure(FailureCause(.cancelled), message) }
}
