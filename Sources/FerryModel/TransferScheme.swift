import Foundation

/// The URL schemes ferry moves files over: the one list the command line, the screen, the RPC and the transport
/// check a URL against.
public enum TransferScheme: String, Sendable, CaseIterable {
    /// The answer header in which ferry's file transport says the SSH host key it checked for the connection
    /// (`ED25519 key SHA256:...`, as ssh shows it): an attempt keeps it (Attempt.hostKey), the detail view shows it.
    public static let hostKeyHeader = "X-Ferry-Host-Key"
    /// The ssh-agent socket of the session that asked for an sftp item (TransferSpec.sshAgent), from the
    /// engine to its transport: never sent to a server.
    public static let sshAgentHeader = "X-Ferry-SSH-Agent"
    /// An sftp upload that writes `NAME.part` and renames it once whole (UploadSpec.remoteTemp), from the engine to
    /// its transport: never sent to a server.
    public static let remoteTempHeader = "X-Ferry-Remote-Temp"

    case http, https, sftp, scp, ftp
    /// ftp with explicit TLS (AUTH TLS on the ftp port, control and data encrypted, the certificate checked as
    /// https checks it): what `ftp://` with a required TLS is in curl (`--ssl-reqd`) and lftp.
    case ftps

    /// HTTP's (http, https): headers, statuses, forms, redirects, HTTP's resumable uploads. The others move a
    /// remote file's bytes: an upload writes the file (no form, no POST), a resume goes by its size and time.
    public var isHTTP: Bool { self == .http || self == .https }

    /// A URL's scheme, when ferry speaks it.
    public init?(_ url: URL?) {
        guard let scheme = url?.scheme?.lowercased(), let known = TransferScheme(rawValue: scheme) else { return nil }
        self = known
    }

    /// Over SSH (sftp, scp): a login is the user's SSH one, the host key is checked against known_hosts.
    public var overSSH: Bool { self == .sftp || self == .scp }

    /// An upload that was cut goes on by appending to what the server has, once its last bytes check out
    /// (sftp, ftp: RemoteAppendRun); scp cannot write at an offset.
    public var appendsUploads: Bool { self == .sftp || isFTP }

    /// ftp, with or without TLS: one protocol's part (FTPPart).
    public var isFTP: Bool { self == .ftp || self == .ftps }

    /// A directory can be listed, so a tree walked (`get -r`): sftp and ftp by their `ls -l` lines; http(s) by
    /// its index pages or WebDAV. scp has no listing.
    public var listsDirectories: Bool { self != .scp }

    /// The port a URL without one connects to.
    public var defaultPort: Int {
        switch self {
        case .http: 80
        case .https: 443
        case .sftp, .scp: 22
        case .ftp, .ftps: 21
        }
    }

    /// How the detail view names it.
    public var protocolName: String {
        switch self {
        case .http, .https: rawValue
        case .sftp, .scp: "\(rawValue), over SSH"
        case .ftp: "ftp (nothing encrypted)"
        case .ftps: "ftps (ftp over TLS)"
        }
    }

    /// The schemes in words, for a message: "http, https, sftp and scp".
    public static var listed: String {
        let names = allCases.map(\.rawValue)
        return names.dropLast().joined(separator: ", ") + " and " + names.last!
    }
}
