import Foundation

/// One request as the server saw it, recorded once its body had fully arrived.
public struct RecordedRequest: Sendable {
    public let method: String
    /// As sent on the request line (path + query).
    public let uri: String
    public let headers: [(name: String, value: String)]
    public let bodyLength: Int
    /// Lowercase hex SHA-256 of the whole body (streamed, never buffered whole).
    public let bodySHA256: String
    /// The first up to `RecordedRequest.bodyPrefixLimit` bytes of the body.
    public let body: Data
    /// `Transfer-Encoding: chunked` was used.
    public let chunked: Bool
    /// The request carried `Expect: 100-continue` (and was answered with an interim 100).
    public let expectContinue: Bool
    public let receivedAt: Date
    /// The HTTP version the request came in: "HTTP/1.1", or "HTTP/2.0" for a stream of an HTTP/2 connection.
    public let version: String
    /// Which of the server's connections it came on (1 for the first accepted; streams share their connection's).
    public let connection: Int

    /// How much of a request body is kept in `body` (16 MiB).
    public static let bodyPrefixLimit = 16 * 1024 * 1024

    /// The path part of `uri` (no query, no fragment).
    public var path: String { pathOf(uri) }

    /// Case-insensitive, first match.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }
}

/// Something the server can serve with Range/If-Range/ETag support.
public struct Resource: Sendable {
    public var body: Data
    /// Sent verbatim as the ETag header, e.g. "\"v1\"".
    public var etag: String?
    /// Sent verbatim as Last-Modified.
    public var lastModified: String?
    public var contentType: String
    /// Sent verbatim as Content-Disposition.
    public var contentDisposition: String?

    public init(
        body: Data,
        etag: String? = nil,
        lastModified: String? = nil,
        contentType: String = "application/octet-stream",
        contentDisposition: String? = nil
    ) {
        self.body = body
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.contentDisposition = contentDisposition
    }

    /// Deterministic pseudo-random bytes (splitmix64, little-endian words). Fast even in debug builds.
    public static func randomBytes(count: Int, seed: UInt64) -> Data {
        precondition(count >= 0, "count must not be negative")
        var data = Data(count: count)
        var state = seed
        data.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in
            guard let base = raw.baseAddress else { return }
            let words = count / 8
            var i = 0
            while i < words {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                base.storeBytes(of: z.littleEndian, toByteOffset: i &* 8, as: UInt64.self)
                i &+= 1
            }
            let rest = count - words * 8
            if rest > 0 {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                for j in 0..<rest {
                    base.storeBytes(of: UInt8(truncatingIfNeeded: z >> (8 * UInt64(j))), toByteOffset: words * 8 + j, as: UInt8.self)
                }
            }
        }
        return data
    }
}

/// How a `.serve` response is delivered.
public struct ServeOptions: Sendable {
    /// false: ignore Range and always answer 200 with the whole body.
    public var honorRange: Bool
    /// false: no Content-Length; the body goes out with Transfer-Encoding: chunked.
    public var sendContentLength: Bool
    /// Write this many body bytes of this response, flush, then close the connection
    /// (no chunked terminator). If it is >= the body length, the whole body goes out and the
    /// connection is still closed without an end-of-message marker.
    public var cutAfter: Int?
    /// Write this many body bytes of this response, then send nothing more and keep the connection open
    /// until the client closes it: a transfer caught mid-way for as long as a test needs.
    public var stallAfter: Int?
    /// Throttle the body to about this many bytes per second (slices every ~25 ms).
    public var bytesPerSecond: Int?
    /// Seconds to wait before sending the response head.
    public var delayBeforeHead: Double?

    public init(
        honorRange: Bool = true,
        sendContentLength: Bool = true,
        cutAfter: Int? = nil,
        stallAfter: Int? = nil,
        bytesPerSecond: Int? = nil,
        delayBeforeHead: Double? = nil
    ) {
        self.honorRange = honorRange
        self.sendContentLength = sendContentLength
        self.cutAfter = cutAfter
        self.stallAfter = stallAfter
        self.bytesPerSecond = bytesPerSecond
        self.delayBeforeHead = delayBeforeHead
    }
}

/// What the server does with one request to a routed path.
public enum Behavior: Sendable {
    /// Serve a resource (GET/HEAD; other methods are answered like GET).
    case serve(Resource, ServeOptions = ServeOptions())
    /// A plain response, e.g. `.status(503, headers: [("Retry-After", "2")])`.
    case status(Int, headers: [(String, String)] = [], body: Data = Data())
    /// 301/302/307/308 with Location.
    case redirect(Int, location: String)
    /// Read the request, never answer; in flight until the connection closes.
    case hang
    /// Close the connection right after the request (and its body) arrived.
    case closeWithoutResponse
}

func pathOf(_ uri: String) -> String {
    var end = uri.endIndex
    if let q = uri.firstIndex(where: { $0 == "?" || $0 == "#" }) { end = q }
    return String(uri[uri.startIndex..<end])
}

/// Body bytes moved at one moment (see TestHTTPServer.bytesSent / bytesReceived).
public struct TrafficSample: Sendable {
    public let at: Date
    public let bytes: Int
}

extension Array where Element == TrafficSample {
    /// Bytes per second between `from` and `to` seconds after `start`.
    public func rate(from: Double, to: Double, after start: Date) -> Double {
        let bytes = filter { $0.at.timeIntervalSince(start) >= from && $0.at.timeIntervalSince(start) < to }.reduce(0) { $0 + $1.bytes }
        return Double(bytes) / (to - from)
    }

    /// The first sample's time.
    public var start: Date? { first?.at }
}
