import Foundation

/// Headers for one host (or every host under a domain), from the config file. Their values are secrets:
/// sent to matching hosts only and never printed.
public struct HostHeaders: Sendable, Equatable {
    /// A host name (`api.example.com`) or a wildcard (`*.example.com`, which also matches `example.com`).
    public var match: String
    public var headers: [HTTPHeader]
    /// The chunks of a resumable upload to this host (`upload_chunk`); nil: the default.
    public var uploadChunk: UploadChunking?

    public init(match: String, headers: [HTTPHeader], uploadChunk: UploadChunking? = nil) {
        self.match = match.lowercased()
        self.headers = headers
        self.uploadChunk = uploadChunk
    }

    public func matches(host: String) -> Bool {
        let host = host.lowercased()
        if match.hasPrefix("*.") {
            let domain = String(match.dropFirst(2))
            return host == domain || host.hasSuffix("." + domain)
        }
        return host == match
    }
}
