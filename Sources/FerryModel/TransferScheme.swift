import Foundation

/// The URL schemes ferry moves files over: the one list the command line, the screen, the RPC and the transport
/// check a URL against.
public enum TransferScheme: String, Sendable, CaseIterable {
    case http, https, sftp, scp

    /// A URL's scheme, when ferry speaks it.
    public init?(_ url: URL?) {
        guard let scheme = url?.scheme?.lowercased(), let known = TransferScheme(rawValue: scheme) else { return nil }
        self = known
    }

    /// Over SSH (sftp, scp): the file's path is the URL's, a login is the user's SSH one, and an upload is the file's
    /// bytes (no forms, no POST, no resumable-upload protocol of HTTP's).
    public var overSSH: Bool { self == .sftp || self == .scp }

    /// The schemes in words, for a message: "http, https, sftp and scp".
    public static var listed: String {
        let names = allCases.map(\.rawValue)
        return names.dropLast().joined(separator: ", ") + " and " + names.last!
    }
}
